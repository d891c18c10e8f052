/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_decode.c - decoding a request body's Content-Encoding: which
 * values need no decoding; gzip (x-gzip, members one after another, a zlib stream),
 * deflate (zlib-wrapped and raw), br and zstd (frames one after another) round trips
 * made with the libraries' own encoders; stacked codings undone from the last;
 * corrupt, truncated and trailing bytes (400 naming the coding); unknown codings and
 * too many (415); bombs of each coding stopped at the limit with the output never
 * holding more than the limit and its slack; the exact limit and one byte past it; an
 * empty body; the hold hook (its refusal is GW_E_BUSY, and it ends at out->cap or 0);
 * and every allocation failing in turn ending in GW_E_NOMEM with nothing held.
 * Threads: single-threaded.
 * See: core/decode.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include "core/alloc.h"
#include "core/decode.h"

#define T_MIB (1024u * 1024u)

/* ---- helpers: encoders (plain malloc: they are not the code under test) ---- */

struct t_bytes {
    unsigned char *p;
    size_t n;
};

static void
t_bytes_add(struct t_bytes *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    assert_non_null(b->p);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static struct gw_str
t_str(const struct t_bytes *b)
{
    return (struct gw_str){(const char *)b->p, b->n};
}

/* zlib's deflate of <in>: <wbits> 31 gzip, 15 zlib, -15 raw. */
static struct t_bytes
t_deflate(const void *in, size_t n, int wbits)
{
    struct t_bytes out = {0};
    unsigned char buf[16384];
    z_stream z;
    int zr;

    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    do {
        z.next_out = buf;
        z.avail_out = sizeof(buf);
        zr = deflate(&z, Z_FINISH);
        assert_true(zr == Z_OK || zr == Z_STREAM_END || zr == Z_BUF_ERROR);
        t_bytes_add(&out, buf, sizeof(buf) - z.avail_out);
    } while (zr != Z_STREAM_END);
    deflateEnd(&z);
    return out;
}

static struct t_bytes
t_br(const void *in, size_t n)
{
    struct t_bytes out = {0};
    size_t cap = BrotliEncoderMaxCompressedSize(n) + 16;

    out.p = malloc(cap);
    assert_non_null(out.p);
    out.n = cap;
    assert_true(BrotliEncoderCompress(5, 22, BROTLI_MODE_TEXT, n, in, &out.n, out.p));
    return out;
}

static struct t_bytes
t_zstd(const void *in, size_t n)
{
    struct t_bytes out = {0};
    size_t cap = ZSTD_compressBound(n);

    out.p = malloc(cap + 1);
    assert_non_null(out.p);
    out.n = ZSTD_compress(out.p, cap, in, n, 3);
    assert_false(ZSTD_isError(out.n));
    return out;
}

/* A JSON body of about <n> bytes, different on every line so that it compresses the
 * way a real conversation does rather than to nothing. */
static struct t_bytes
t_json(size_t n)
{
    struct t_bytes b = {0};
    char line[160];
    unsigned i = 0;

    t_bytes_add(&b, "{\"model\":\"m\",\"messages\":[", 25);
    while (b.n < n) {
        int k = snprintf(line, sizeof(line),
                         "%s{\"role\":\"user\",\"content\":\"line %u: the quick brown fox %x\"}",
                         i ? "," : "", i, i * 2654435761u);

        t_bytes_add(&b, line, (size_t)k);
        i++;
    }
    t_bytes_add(&b, "]}", 2);
    return b;
}

/* What the hold hook saw. */
struct t_hold {
    size_t now, peak;
    size_t first_drop; /* the total told the first time it went down (0: never) */
    unsigned calls;
    size_t refuse_above; /* 0: never refuse */
};

static bool
t_on_hold(void *arg, size_t bytes)
{
    struct t_hold *h = arg;

    h->calls++;
    if (h->refuse_above && bytes > h->refuse_above && bytes > h->now)
        return false;
    if (bytes < h->now && !h->first_drop)
        h->first_drop = bytes;
    h->now = bytes;
    if (bytes > h->peak)
        h->peak = bytes;
    return true;
}

/* Decodes <in> with <codings> and limit <max>, checks the contract that holds for
 * every outcome (out empty on failure; the hook ends at out->cap or 0; the output never
 * held more than max and its slack), and returns the code. <out> may be NULL. */
static enum gw_code
t_decode(const char *codings, struct gw_str in, size_t max, struct gw_buf *out, struct gw_buf *why,
         struct t_hold *h)
{
    struct t_hold local = {0};
    struct gw_decode_limit lim;
    struct gw_buf o = {0}, why_local = {0};
    enum gw_code rc;

    if (!h)
        h = &local;
    if (!why)
        why = &why_local;
    lim = (struct gw_decode_limit){max, t_on_hold, h};
    rc = gw_decode_body(gw_str_c(codings), in, &lim, &o, why);
    assert_true(h->peak <= max + GW_DECODE_SLACK);
    if (rc == GW_OK) {
        assert_int_equal(h->now, o.cap);
        assert_true(o.cap <= max + GW_DECODE_SLACK);
        assert_true(o.len <= max);
        if (o.data)
            assert_int_equal(o.data[o.len], '\0');
    } else {
        assert_null(o.data);
        assert_int_equal(o.len, 0);
        assert_int_equal(h->now, 0);
    }
    if (rc == GW_E_NOMEM || rc == GW_OK)
        assert_null(why->data);
    else
        assert_non_null(why->data);
    if (out)
        *out = o;
    else
        gw_buf_fini(&o);
    gw_buf_fini(&why_local);
    return rc;
}

/* Decodes <enc> and checks it gives back <plain>. */
static void
t_round_trip(const char *codings, const struct t_bytes *enc, const struct t_bytes *plain)
{
    struct gw_buf out = {0}, why = {0};

    assert_int_equal(t_decode(codings, t_str(enc), 32 * T_MIB, &out, &why, NULL), GW_OK);
    assert_int_equal(out.len, plain->n);
    assert_int_equal(out.cap, out.len + 1); /* the spare room was given back */
    assert_memory_equal(out.data, plain->p, plain->n);
    assert_null(why.data);
    gw_buf_fini(&out);
}

static void
t_expect(const char *codings, struct gw_str in, size_t max, enum gw_code want, const char *why_has)
{
    struct gw_buf why = {0};

    assert_int_equal(t_decode(codings, in, max, NULL, &why, NULL), want);
    if (why_has) {
        assert_non_null(why.data);
        if (!strstr(why.data, why_has))
            fail_msg("why \"%s\" lacks \"%s\"", why.data, why_has);
    }
    gw_buf_fini(&why);
}

/* ---- which values need decoding ---- */

static void
test_decode_identity_values_need_nothing(void **state)
{
    (void)state;
    assert_true(gw_decode_is_identity(GW_STR_LIT("")));
    assert_true(gw_decode_is_identity((struct gw_str){NULL, 0}));
    assert_true(gw_decode_is_identity(GW_STR_LIT("identity")));
    assert_true(gw_decode_is_identity(GW_STR_LIT(" Identity ,\tIDENTITY")));
    assert_true(gw_decode_is_identity(GW_STR_LIT(",, ,")));
    assert_false(gw_decode_is_identity(GW_STR_LIT("gzip")));
    assert_false(gw_decode_is_identity(GW_STR_LIT("identity, br")));
    assert_false(gw_decode_is_identity(GW_STR_LIT("compress")));
}

/* ---- round trips ---- */

static void
test_decode_gzip_round_trip(void **state)
{
    static const size_t sizes[] = {1, 100, 5000, 300000};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct t_bytes plain = t_json(sizes[i]);
        struct t_bytes enc = t_deflate(plain.p, plain.n, 31);

        t_round_trip("gzip", &enc, &plain);
        t_round_trip("x-gzip", &enc, &plain);
        t_round_trip(" GZip ", &enc, &plain);
        free(enc.p);
        free(plain.p);
    }
}

static void
test_decode_gzip_members_one_after_another(void **state)
{
    struct t_bytes a = t_json(3000), b = t_json(7000), plain = {0};
    struct t_bytes ea = t_deflate(a.p, a.n, 31), eb = t_deflate(b.p, b.n, 31);

    (void)state;
    t_bytes_add(&plain, a.p, a.n);
    t_bytes_add(&plain, b.p, b.n);
    t_bytes_add(&ea, eb.p, eb.n);
    t_round_trip("gzip", &ea, &plain);
    free(a.p);
    free(b.p);
    free(plain.p);
    free(ea.p);
    free(eb.p);
}

static void
test_decode_deflate_zlib_and_raw(void **state)
{
    struct t_bytes plain = t_json(20000);
    struct t_bytes zl = t_deflate(plain.p, plain.n, 15), raw = t_deflate(plain.p, plain.n, -15);

    (void)state;
    t_round_trip("deflate", &zl, &plain);
    t_round_trip("deflate", &raw, &plain);
    t_round_trip("gzip", &zl, &plain); /* gzip takes a zlib stream as well */
    free(plain.p);
    free(zl.p);
    free(raw.p);
}

static void
test_decode_br_round_trip(void **state)
{
    static const size_t sizes[] = {1, 100, 5000, 300000};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct t_bytes plain = t_json(sizes[i]);
        struct t_bytes enc = t_br(plain.p, plain.n);

        t_round_trip("br", &enc, &plain);
        t_round_trip("BR", &enc, &plain);
        free(enc.p);
        free(plain.p);
    }
}

static void
test_decode_zstd_round_trip_and_frames(void **state)
{
    static const size_t sizes[] = {1, 100, 5000, 300000};
    struct t_bytes a = t_json(4000), b = t_json(9000), plain = {0}, two;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct t_bytes p = t_json(sizes[i]);
        struct t_bytes enc = t_zstd(p.p, p.n);

        t_round_trip("zstd", &enc, &p);
        free(enc.p);
        free(p.p);
    }
    /* frames one after another are one body */
    t_bytes_add(&plain, a.p, a.n);
    t_bytes_add(&plain, b.p, b.n);
    two = t_zstd(a.p, a.n);
    {
        struct t_bytes eb = t_zstd(b.p, b.n);

        t_bytes_add(&two, eb.p, eb.n);
        free(eb.p);
    }
    t_round_trip("zstd", &two, &plain);
    free(a.p);
    free(b.p);
    free(plain.p);
    free(two.p);
}

static void
test_decode_stacked_codings_undone_from_the_last(void **state)
{
    struct t_bytes plain = t_json(50000);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31);
    struct t_bytes gz_br = t_br(gz.p, gz.n);
    struct t_bytes zs = t_zstd(gz_br.p, gz_br.n);

    (void)state;
    t_round_trip("gzip, br", &gz_br, &plain);
    t_round_trip("gzip,identity,br", &gz_br, &plain);
    t_round_trip("gzip, br, zstd", &zs, &plain);
    /* the wrong order is brotli data read as gzip */
    t_expect("br, gzip", t_str(&gz_br), 32 * T_MIB, GW_E_BAD_REQUEST,
             "the request body is not valid gzip: ");
    free(plain.p);
    free(gz.p);
    free(gz_br.p);
    free(zs.p);
}

/* ---- refusals ---- */

static void
test_decode_corrupt_input_names_the_coding(void **state)
{
    struct t_bytes plain = t_json(20000);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31), br = t_br(plain.p, plain.n);
    struct t_bytes zs = t_zstd(plain.p, plain.n), zl = t_deflate(plain.p, plain.n, 15);

    (void)state;
    t_expect("gzip", GW_STR_LIT("{\"model\":\"m\"}"), T_MIB, GW_E_BAD_REQUEST,
             "the request body is not valid gzip: incorrect header check");
    t_expect("zstd", GW_STR_LIT("{\"model\":\"m\"}"), T_MIB, GW_E_BAD_REQUEST,
             "the request body is not valid zstd: ");
    t_expect("br", GW_STR_LIT("{\"model\":\"m\"}"), T_MIB, GW_E_BAD_REQUEST,
             "the request body is not valid br: ");
    /* flipped bytes in the middle: the checksums or the structure catch them */
    gz.p[gz.n / 2] ^= 0x55;
    gz.p[gz.n / 2 + 1] ^= 0xaa;
    t_expect("gzip", t_str(&gz), T_MIB, GW_E_BAD_REQUEST, "the request body is not valid gzip: ");
    zl.p[zl.n - 2] ^= 0x01; /* the adler32 */
    t_expect("deflate", t_str(&zl), T_MIB, GW_E_BAD_REQUEST,
             "the request body is not valid deflate: incorrect data check");
    br.p[br.n / 2] ^= 0x55;
    br.p[br.n / 2 + 1] ^= 0xaa;
    {
        enum gw_code rc = t_decode("br", t_str(&br), T_MIB, NULL, NULL, NULL);

        /* brotli has no checksum: a flip may still decode, to other bytes */
        assert_true(rc == GW_E_BAD_REQUEST || rc == GW_OK);
    }
    zs.p[zs.n / 2] ^= 0x55;
    zs.p[zs.n / 2 + 1] ^= 0xaa;
    {
        enum gw_code rc = t_decode("zstd", t_str(&zs), T_MIB, NULL, NULL, NULL);

        assert_true(rc == GW_E_BAD_REQUEST || rc == GW_OK);
    }
    free(plain.p);
    free(gz.p);
    free(br.p);
    free(zs.p);
    free(zl.p);
}

static void
test_decode_truncated_input_is_bad_request(void **state)
{
    struct t_bytes plain = t_json(20000);
    struct t_bytes enc[4];
    static const char *const names[] = {"gzip", "deflate", "br", "zstd"};
    size_t i;

    (void)state;
    enc[0] = t_deflate(plain.p, plain.n, 31);
    enc[1] = t_deflate(plain.p, plain.n, 15);
    enc[2] = t_br(plain.p, plain.n);
    enc[3] = t_zstd(plain.p, plain.n);
    for (i = 0; i < 4; i++) {
        char want[64];

        snprintf(want, sizeof(want), "not valid %s: it ends before its data does", names[i]);
        /* cut in the trailer, in the middle, after the header */
        t_expect(names[i], (struct gw_str){(const char *)enc[i].p, enc[i].n - 1}, T_MIB,
                 GW_E_BAD_REQUEST, want);
        t_expect(names[i], (struct gw_str){(const char *)enc[i].p, enc[i].n / 2}, T_MIB,
                 GW_E_BAD_REQUEST, want);
        t_expect(names[i], (struct gw_str){(const char *)enc[i].p, 6}, T_MIB, GW_E_BAD_REQUEST,
                 "not valid");
        free(enc[i].p);
    }
    free(plain.p);
}

static void
test_decode_bytes_after_the_end_are_refused(void **state)
{
    struct t_bytes plain = t_json(2000);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31), br = t_br(plain.p, plain.n);
    struct t_bytes zs = t_zstd(plain.p, plain.n);

    (void)state;
    t_bytes_add(&gz, "{}", 2);
    t_expect("gzip", t_str(&gz), T_MIB, GW_E_BAD_REQUEST, "bytes follow the end of its data");
    t_bytes_add(&br, "{}", 2);
    t_expect("br", t_str(&br), T_MIB, GW_E_BAD_REQUEST, "bytes follow the end of its data");
    t_bytes_add(&zs, "{}", 2);
    t_expect("zstd", t_str(&zs), T_MIB, GW_E_BAD_REQUEST, "not valid zstd: ");
    free(plain.p);
    free(gz.p);
    free(br.p);
    free(zs.p);
}

static void
test_decode_unknown_coding_is_unsupported(void **state)
{
    struct t_bytes plain = t_json(100);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31);

    (void)state;
    t_expect("compress", t_str(&gz), T_MIB, GW_E_UNSUPPORTED_ENCODING,
             "Content-Encoding \"compress\" is not supported");
    t_expect("gzip, snappy", t_str(&gz), T_MIB, GW_E_UNSUPPORTED_ENCODING, "\"snappy\"");
    /* checked before any byte is decoded, even of an empty body */
    t_expect("lz4", GW_STR_LIT(""), T_MIB, GW_E_UNSUPPORTED_ENCODING, "\"lz4\"");
    /* what reaches the client is printable and short */
    t_expect("a\x01\xff", t_str(&gz), T_MIB, GW_E_UNSUPPORTED_ENCODING, "\"a??\"");
    t_expect("gzip, gzip, gzip, gzip, gzip", t_str(&gz), T_MIB, GW_E_UNSUPPORTED_ENCODING,
             "more than 4 codings");
    free(plain.p);
    free(gz.p);
}

static void
test_decode_empty_body_is_empty(void **state)
{
    static const char *const names[] = {"gzip", "deflate", "br", "zstd", "gzip, br", "identity"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct gw_buf out = {0};

        assert_int_equal(t_decode(names[i], GW_STR_LIT(""), T_MIB, &out, NULL, NULL), GW_OK);
        assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
    }
}

static void
test_decode_identity_copies_within_the_limit(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(t_decode("identity", GW_STR_LIT("{}"), 2, &out, NULL, NULL), GW_OK);
    assert_int_equal(out.len, 2);
    assert_memory_equal(out.data, "{}", 2);
    gw_buf_fini(&out);
    t_expect("identity", GW_STR_LIT("{} "), 2, GW_E_BODY_TOO_LARGE, "longer than 2 bytes");
}

/* ---- limits ---- */

/* Exactly <max> decoded bytes pass; one more is refused; for every coding. */
static void
test_decode_exact_limit_and_one_past(void **state)
{
    const size_t max = 100000;
    struct t_bytes at = t_json(max + 1000), over = {0};
    size_t c;

    (void)state;
    t_bytes_add(&over, at.p, max + 1);
    at.n = max; /* the first max bytes, and one more: the decoder does not read JSON */
    for (c = 0; c < 4; c++) {
        static const char *const names[] = {"gzip", "deflate", "br", "zstd"};
        struct t_bytes ea, eo;
        struct gw_buf out = {0};

        ea = c < 2    ? t_deflate(at.p, at.n, c ? 15 : 31)
             : c == 2 ? t_br(at.p, at.n)
                      : t_zstd(at.p, at.n);
        eo = c < 2    ? t_deflate(over.p, over.n, c ? 15 : 31)
             : c == 2 ? t_br(over.p, over.n)
                      : t_zstd(over.p, over.n);
        assert_int_equal(t_decode(names[c], t_str(&ea), max, &out, NULL, NULL), GW_OK);
        assert_int_equal(out.len, max);
        gw_buf_fini(&out);
        t_expect(names[c], t_str(&eo), max, GW_E_BODY_TOO_LARGE, "decodes to more than 100000");
        free(ea.p);
        free(eo.p);
    }
    free(at.p);
    free(over.p);
}

/* A gzip body of <mib> MiB of zeros in about a KiB per MiB: each MiB deflated with a
 * full flush comes out as the same bytes (the flush resets the window), so the middle
 * is one chunk repeated; the trailer carries the real CRC and size, so it is a valid
 * gzip file (as the test of a small one shows). */
static struct t_bytes
t_gzip_bomb(unsigned mib)
{
    unsigned char *zeros = calloc(1, T_MIB), buf[16384];
    struct t_bytes first = {0}, chunk = {0}, bomb = {0};
    uLong crc1, crc;
    z_stream z;
    unsigned i;
    int pass;

    assert_non_null(zeros);
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY), Z_OK);
    for (pass = 0; pass < 2; pass++) {
        struct t_bytes *into = pass ? &chunk : &first;

        z.next_in = zeros;
        z.avail_in = T_MIB;
        do {
            z.next_out = buf;
            z.avail_out = sizeof(buf);
            assert_int_equal(deflate(&z, Z_FULL_FLUSH), Z_OK);
            t_bytes_add(into, buf, sizeof(buf) - z.avail_out);
        } while (z.avail_out == 0);
    }
    t_bytes_add(&bomb, first.p, first.n);
    for (i = 1; i < mib; i++)
        t_bytes_add(&bomb, chunk.p, chunk.n);
    z.next_out = buf;
    z.avail_out = sizeof(buf);
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    t_bytes_add(&bomb, buf, sizeof(buf) - z.avail_out);
    deflateEnd(&z);
    crc1 = crc32(0, zeros, T_MIB);
    for (crc = crc1, i = 1; i < mib; i++)
        crc = crc32_combine(crc, crc1, T_MIB);
    for (i = 0; i < 4; i++) {
        bomb.p[bomb.n - 8 + i] = (unsigned char)(crc >> (8 * i));
        bomb.p[bomb.n - 4 + i] = (unsigned char)(((uint64_t)mib * T_MIB) >> (8 * i));
    }
    free(zeros);
    free(first.p);
    free(chunk.p);
    return bomb;
}

static void
test_decode_gzip_bomb_stops_at_the_limit(void **state)
{
    struct t_bytes small = t_gzip_bomb(3), bomb = t_gzip_bomb(1024); /* 1 GiB of zeros */
    struct t_hold h = {0};
    struct gw_buf out = {0}, why = {0};
    size_t i;

    (void)state;
    /* the construction is a valid gzip file */
    assert_int_equal(t_decode("gzip", t_str(&small), 3 * T_MIB, &out, NULL, NULL), GW_OK);
    assert_int_equal(out.len, 3 * T_MIB);
    for (i = 0; i < out.len; i++)
        if (out.data[i])
            fail_msg("byte %zu is not zero", i);
    gw_buf_fini(&out);
    assert_true(bomb.n < 2 * T_MIB);
    /* 1 GiB from under 2 MiB, stopped at 1 MiB and a byte */
    assert_int_equal(t_decode("gzip", t_str(&bomb), T_MIB, NULL, &why, &h), GW_E_BODY_TOO_LARGE);
    assert_true(h.peak <= T_MIB + GW_DECODE_SLACK);
    assert_int_equal(h.now, 0);
    assert_string_equal(why.data, "the request body decodes to more than 1048576 bytes");
    gw_buf_fini(&why);
    free(small.p);
    free(bomb.p);
}

static void
test_decode_zstd_and_br_bombs_stop_at_the_limit(void **state)
{
    unsigned char *zeros = calloc(1, T_MIB), buf[65536];
    struct t_bytes frame, zbomb = {0}, bbomb = {0};
    BrotliEncoderState *enc;
    struct t_hold h = {0};
    unsigned i;

    (void)state;
    assert_non_null(zeros);
    /* zstd: 1024 frames of a MiB of zeros each, one after another */
    frame = t_zstd(zeros, T_MIB);
    for (i = 0; i < 1024; i++)
        t_bytes_add(&zbomb, frame.p, frame.n);
    assert_int_equal(t_decode("zstd", t_str(&zbomb), T_MIB, NULL, NULL, &h), GW_E_BODY_TOO_LARGE);
    assert_true(h.peak <= T_MIB + GW_DECODE_SLACK);
    /* br: one stream of 64 MiB of zeros */
    enc = BrotliEncoderCreateInstance(NULL, NULL, NULL);
    assert_non_null(enc);
    BrotliEncoderSetParameter(enc, BROTLI_PARAM_QUALITY, 1);
    for (i = 0; i <= 64; i++) {
        const uint8_t *next_in = zeros;
        size_t avail_in = i < 64 ? T_MIB : 0;
        BrotliEncoderOperation op = i < 64 ? BROTLI_OPERATION_PROCESS : BROTLI_OPERATION_FINISH;

        do {
            uint8_t *next_out = buf;
            size_t avail_out = sizeof(buf);

            assert_true(BrotliEncoderCompressStream(enc, op, &avail_in, &next_in, &avail_out,
                                                    &next_out, NULL));
            t_bytes_add(&bbomb, buf, sizeof(buf) - avail_out);
        } while (avail_in || BrotliEncoderHasMoreOutput(enc));
    }
    assert_true(BrotliEncoderIsFinished(enc));
    BrotliEncoderDestroyInstance(enc);
    memset(&h, 0, sizeof(h));
    assert_int_equal(t_decode("br", t_str(&bbomb), T_MIB, NULL, NULL, &h), GW_E_BODY_TOO_LARGE);
    assert_true(h.peak <= T_MIB + GW_DECODE_SLACK);
    free(zeros);
    free(frame.p);
    free(zbomb.p);
    free(bbomb.p);
}

/* A zstd frame that asks for a 16 MiB window (over the 8 MiB allowed for a 1 MiB
 * limit) is refused from its header, before the window would be allocated. */
static void
test_decode_zstd_window_past_the_limit_is_refused(void **state)
{
    /* magic, descriptor (no size, no checksum), window 2^(10+14), a last raw block of 1 */
    static const unsigned char frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00,
                                          0x70, 0x09, 0x00, 0x00, 'x'};
    static const unsigned char small[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00,
                                          0x00, 0x09, 0x00, 0x00, 'x'};
    struct gw_str big = {(const char *)frame, sizeof(frame)};
    struct gw_buf out = {0};

    (void)state;
    t_expect("zstd", big, T_MIB, GW_E_BAD_REQUEST, "its window is larger than the gateway decodes");
    /* the same frame with a 1 KiB window decodes; and 16 MiB passes under a 16 MiB limit */
    assert_int_equal(t_decode("zstd", (struct gw_str){(const char *)small, sizeof(small)}, T_MIB,
                              &out, NULL, NULL),
                     GW_OK);
    assert_int_equal(out.len, 1);
    assert_int_equal(out.data[0], 'x');
    gw_buf_fini(&out);
    assert_int_equal(t_decode("zstd", big, 16 * T_MIB, NULL, NULL, NULL), GW_OK);
}

/* A frame that states its size is held to it: one stating 64 KiB whose only block is
 * an empty last one is corrupt (libzstd's streaming path lets that through), and one
 * stating more than the limit is refused before any of it is decoded. */
static void
test_decode_zstd_stated_size_is_checked(void **state)
{
    /* magic, descriptor (single segment, 4-byte size), 65536, an empty last raw block */
    static const unsigned char frame[] = {0x28, 0xb5, 0x2f, 0xfd, 0xa0, 0x00,
                                          0x00, 0x01, 0x00, 0x01, 0x00, 0x00};
    struct gw_str f = {(const char *)frame, sizeof(frame)};
    struct t_bytes plain = t_json(5000), enc = t_zstd(plain.p, plain.n);
    struct t_hold h = {0};

    (void)state;
    t_expect("zstd", f, T_MIB, GW_E_BAD_REQUEST, "differs in size from what its header states");
    t_expect("zstd", f, 65535, GW_E_BODY_TOO_LARGE, "decodes to more than 65535 bytes");
    /* a real body stating its size over the limit: refused with nothing allocated */
    assert_int_equal(t_decode("zstd", t_str(&enc), plain.n - 1, NULL, NULL, &h),
                     GW_E_BODY_TOO_LARGE);
    assert_int_equal(h.peak, 0);
    free(plain.p);
    free(enc.p);
}

/* ---- the hold hook ---- */

static void
test_decode_hold_refusal_is_busy(void **state)
{
    struct t_bytes plain = t_json(400000);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31), zs = t_zstd(gz.p, gz.n);
    struct t_hold h = {0};
    struct gw_buf why = {0}, out = {0};
    size_t alone;

    (void)state;
    h.refuse_above = plain.n * 3 / 4;
    assert_int_equal(t_decode("gzip", t_str(&gz), 32 * T_MIB, NULL, &why, &h), GW_E_BUSY);
    assert_true(h.calls > 1); /* it grew within what was allowed, then was refused */
    assert_non_null(strstr(why.data, "retry shortly"));
    gw_buf_fini(&why);
    /* stacked: both steps' buffers count together while the second step runs. The
     * first drop is the free of the gzip bytes: what is left then is the plain body's
     * buffer at its largest; a hook allowing exactly that refuses the decode, since
     * the gzip bytes were still held while it grew. */
    memset(&h, 0, sizeof(h));
    assert_int_equal(t_decode("gzip, zstd", t_str(&zs), 32 * T_MIB, &out, NULL, &h), GW_OK);
    assert_int_equal(out.len, plain.n);
    assert_true(h.first_drop > plain.n && h.peak >= h.first_drop + gz.n);
    alone = h.first_drop;
    memset(&h, 0, sizeof(h));
    h.refuse_above = alone;
    assert_int_equal(t_decode("gzip, zstd", t_str(&zs), 32 * T_MIB, NULL, NULL, &h), GW_E_BUSY);
    gw_buf_fini(&out);
    free(plain.p);
    free(gz.p);
    free(zs.p);
}

/* ---- out of memory ---- */

/* Fails each allocation of decoding <enc> in turn: every run ends in GW_E_NOMEM with
 * nothing held (t_decode checks), until one needs no more than were failed. */
static void
t_each_allocation_fails(const char *codings, const struct t_bytes *enc, const struct t_bytes *plain)
{
    unsigned long k;

    for (k = 1; k < 10000; k++) {
        struct gw_buf out = {0};
        enum gw_code rc;

        gw_alloc_fail_at(k);
        rc = t_decode(codings, t_str(enc), 32 * T_MIB, &out, NULL, NULL);
        gw_alloc_fail_at(0);
        if (rc == GW_OK) {
            assert_int_equal(out.len, plain->n);
            assert_memory_equal(out.data, plain->p, plain->n);
            gw_buf_fini(&out);
            assert_true(k > 1); /* some allocation was failed before */
            return;
        }
        if (rc != GW_E_NOMEM)
            fail_msg("%s: allocation %lu failing gave %s", codings, k, gw_code_str(rc));
    }
    fail_msg("%s: still failing after 10000 allocations", codings);
}

static void
test_decode_every_allocation_failure_ends_cleanly(void **state)
{
    struct t_bytes plain = t_json(200000);
    struct t_bytes gz = t_deflate(plain.p, plain.n, 31), raw = t_deflate(plain.p, plain.n, -15);
    struct t_bytes br = t_br(plain.p, plain.n), zs = t_zstd(plain.p, plain.n);
    struct t_bytes gz_br = t_br(gz.p, gz.n);

    (void)state;
    t_each_allocation_fails("gzip", &gz, &plain);
    t_each_allocation_fails("deflate", &raw, &plain);
    t_each_allocation_fails("br", &br, &plain);
    t_each_allocation_fails("zstd", &zs, &plain);
    t_each_allocation_fails("gzip, br", &gz_br, &plain);
    t_each_allocation_fails("identity", &plain, &plain);
    free(plain.p);
    free(gz.p);
    free(raw.p);
    free(br.p);
    free(zs.p);
    free(gz_br.p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_identity_values_need_nothing),
        cmocka_unit_test(test_decode_gzip_round_trip),
        cmocka_unit_test(test_decode_gzip_members_one_after_another),
        cmocka_unit_test(test_decode_deflate_zlib_and_raw),
        cmocka_unit_test(test_decode_br_round_trip),
        cmocka_unit_test(test_decode_zstd_round_trip_and_frames),
        cmocka_unit_test(test_decode_stacked_codings_undone_from_the_last),
        cmocka_unit_test(test_decode_corrupt_input_names_the_coding),
        cmocka_unit_test(test_decode_truncated_input_is_bad_request),
        cmocka_unit_test(test_decode_bytes_after_the_end_are_refused),
        cmocka_unit_test(test_decode_unknown_coding_is_unsupported),
        cmocka_unit_test(test_decode_empty_body_is_empty),
        cmocka_unit_test(test_decode_identity_copies_within_the_limit),
        cmocka_unit_test(test_decode_exact_limit_and_one_past),
        cmocka_unit_test(test_decode_gzip_bomb_stops_at_the_limit),
        cmocka_unit_test(test_decode_zstd_and_br_bombs_stop_at_the_limit),
        cmocka_unit_test(test_decode_zstd_window_past_the_limit_is_refused),
        cmocka_unit_test(test_decode_zstd_stated_size_is_checked),
        cmocka_unit_test(test_decode_hold_refusal_is_busy),
        cmocka_unit_test(test_decode_every_allocation_failure_ends_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
