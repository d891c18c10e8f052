/* SPDX-License-Identifier: MIT
 * core/decode.c - decodes a request body's Content-Encoding (see core/decode.h).
 * Each coding is one step driven through its library's streaming API (zlib's inflate,
 * BrotliDecoderDecompressStream, ZSTD_decompressStream) into an output buffer that
 * grows by doubling up to the limit and one byte: the library never gets room past
 * that byte, so once it is written the body is known to be too large and the step
 * stops, however much the input would still expand. The libraries allocate their state
 * through core/alloc.h too (zlib's zalloc, brotli's alloc_func, zstd's customMem), so
 * the OOM tests reach their failures. Their own memory beyond the output: zlib 32 KiB
 * of window, brotli at most 16 MiB (its large-window mode stays off), zstd at most the
 * window set below.
 * Owns:    nothing beyond one call.
 * Threads: any; never blocks.
 * See:     core/decode.h, tests/unit/core/test_decode.c, tests/fuzz/fuzz_decode.c
 */
#include "core/decode.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#define ZLIB_CONST /* next_in is const: the body is not ours to write */
#include <zlib.h>

#include <brotli/decode.h>

/* ZSTD_createDCtx_advanced (allocations through gw_malloc) is in zstd's "static
 * linking" section; Debian's libzstd.so exports it, and ZSTD_customMem has kept its
 * layout since zstd 1.0. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "core/alloc.h"

/* An output buffer's first size: the input times this (bodies of JSON compress about
 * 5 to 10 times), at least DECODE_MIN_CAP; it doubles from there. */
#define DECODE_GUESS_RATIO 4
#define DECODE_MIN_CAP 4096
/* zstd's window: at least 8 MiB (zstd -19 on unknown sizes uses 2^23; Codex's level 3,
 * 2^21), more when the limit is larger, up to 128 MiB (zstd's own default cap). A
 * frame asking for more is refused before its window is allocated. */
#define DECODE_ZSTD_WLOG_MIN 23
#define DECODE_ZSTD_WLOG_MAX 27
/* Bytes fed to zlib at once: its counters are 32-bit. */
#define DECODE_ZLIB_CHUNK (1u << 30)

enum coding {
    CODING_GZIP,
    CODING_DEFLATE,
    CODING_BR,
    CODING_ZSTD,
};

static const char *const coding_names[] = {
    [CODING_GZIP] = "gzip",
    [CODING_DEFLATE] = "deflate",
    [CODING_BR] = "br",
    [CODING_ZSTD] = "zstd",
};

/* One decode: its limit and the bytes its output buffers hold together (as last told
 * to lim->hold). */
struct dec {
    const struct gw_decode_limit *lim;
    size_t held;
    struct gw_buf *why;
    enum coding coding; /* the step running, for messages */
};

/* ---- the Content-Encoding list ---- */

static bool
is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* The next element of the comma-separated list <*rest>, without its white space; an
 * empty element (",," is allowed by RFC 9110 5.6.1) comes back empty, except after a last
 * comma. False at the end. */
static bool
next_element(struct gw_str *rest, struct gw_str *el)
{
    const char *p, *end, *comma;

    if (!rest->ptr || rest->len == 0)
        return false;
    p = rest->ptr;
    end = p + rest->len;
    comma = memchr(p, ',', (size_t)(end - p));
    el->ptr = p;
    el->len = (size_t)((comma ? comma : end) - p);
    rest->ptr = comma ? comma + 1 : end;
    rest->len = (size_t)(end - rest->ptr);
    while (el->len && is_ows(el->ptr[0])) {
        el->ptr++;
        el->len--;
    }
    while (el->len && is_ows(el->ptr[el->len - 1]))
        el->len--;
    return true;
}

bool
gw_decode_is_identity(struct gw_str codings)
{
    struct gw_str rest = codings, el;

    while (next_element(&rest, &el))
        if (el.len && !gw_str_eq_nocase(el, GW_STR_LIT("identity")))
            return false;
    return true;
}

/* Appends <s> to <why> as a client may see it: printable ASCII, at most 40 bytes. */
static void
why_quote(struct gw_buf *why, struct gw_str s)
{
    size_t i, n = s.len < 40 ? s.len : 40;

    for (i = 0; i < n; i++) {
        char c = s.ptr[i];

        (void)gw_buf_append(why, c >= 0x20 && c < 0x7f ? &c : "?", 1);
    }
    if (n < s.len)
        (void)gw_buf_append_cstr(why, "...");
}

/* The codings of <codings> in the order they were applied, identity left out. */
static enum gw_code
parse_codings(struct gw_str codings, enum coding *list, size_t *n, struct gw_buf *why)
{
    static const struct {
        const char *name;
        enum coding coding;
    } known[] = {
        {"gzip", CODING_GZIP}, {"x-gzip", CODING_GZIP}, {"deflate", CODING_DEFLATE},
        {"br", CODING_BR},     {"zstd", CODING_ZSTD},
    };
    struct gw_str rest = codings, el;
    size_t i;

    *n = 0;
    while (next_element(&rest, &el)) {
        if (el.len == 0 || gw_str_eq_nocase(el, GW_STR_LIT("identity")))
            continue;
        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            if (gw_str_eq_nocase(el, gw_str_c(known[i].name)))
                break;
        if (i == sizeof(known) / sizeof(known[0])) {
            (void)gw_buf_append_cstr(why, "Content-Encoding \"");
            why_quote(why, el);
            (void)gw_buf_append_cstr(why, "\" is not supported: the gateway decodes gzip, "
                                          "deflate, br and zstd request bodies");
            return GW_E_UNSUPPORTED_ENCODING;
        }
        if (*n == GW_DECODE_MAX_CODINGS) {
            (void)gw_buf_printf(why,
                                "Content-Encoding lists more than %d codings: the gateway "
                                "decodes at most that many, one over the other",
                                GW_DECODE_MAX_CODINGS);
            return GW_E_UNSUPPORTED_ENCODING;
        }
        list[(*n)++] = known[i].coding;
    }
    return GW_OK;
}

/* ---- output buffers ---- */

/* Tells the hook the output buffers now hold <total> bytes: false when it refused a
 * growth (nothing changed then). */
static bool
hold_to(struct dec *d, size_t total)
{
    bool ok = true;

    if (total != d->held && d->lim->hold)
        ok = d->lim->hold(d->lim->arg, total) || total < d->held;
    if (ok)
        d->held = total;
    return ok;
}

/* Frees <b> and tells the hook. */
static void
out_free(struct dec *d, struct gw_buf *b)
{
    size_t cap = b->cap;

    gw_buf_fini(b);
    (void)hold_to(d, d->held - cap);
}

/* Makes room for at least one more byte in <b> (filled to cap - 1, the NUL's byte
 * aside): doubles it, to at most max + GW_DECODE_SLACK. <guess> sizes the first
 * allocation. The caller has checked that b->len <= max. */
static enum gw_code
out_grow(struct dec *d, struct gw_buf *b, size_t guess)
{
    size_t top = d->lim->max + GW_DECODE_SLACK, cap;
    char *p;

    if (b->cap) {
        cap = b->cap > top / 2 ? top : b->cap * 2;
    } else {
        cap = guess > top / DECODE_GUESS_RATIO ? top : guess * DECODE_GUESS_RATIO;
        if (cap < DECODE_MIN_CAP)
            cap = DECODE_MIN_CAP < top ? DECODE_MIN_CAP : top;
    }
    if (!hold_to(d, d->held - b->cap + cap)) {
        (void)gw_buf_append_cstr(d->why, "the gateway cannot hold the decoded request body "
                                         "now; retry shortly");
        return GW_E_BUSY;
    }
    p = gw_realloc(b->data, cap);
    if (!p) {
        (void)hold_to(d, d->held - cap + b->cap);
        return GW_E_NOMEM;
    }
    b->data = p;
    b->cap = cap;
    return GW_OK;
}

/* Before each call into a library: GW_E_BODY_TOO_LARGE once the output passed the
 * limit, else room for at least one byte (cap - 1 - len of it, never past max + 1). */
static enum gw_code
out_room(struct dec *d, struct gw_buf *b, size_t guess)
{
    if (b->len > d->lim->max)
        return GW_E_BODY_TOO_LARGE;
    if (b->len + 1 < b->cap)
        return GW_OK;
    return out_grow(d, b, guess);
}

static enum gw_code
bad(struct dec *d, const char *what)
{
    (void)gw_buf_printf(d->why, "the request body is not valid %s: %s", coding_names[d->coding],
                        what);
    return GW_E_BAD_REQUEST;
}

/* ---- gzip and deflate (zlib) ---- */

static voidpf
z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return size && items > SIZE_MAX / size ? NULL : gw_malloc((size_t)items * size);
}

static void
z_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    gw_free(p);
}

/* A zlib stream header (RFC 1950 2.2): deflate, a window of at most 32 KiB, the check
 * bits right. "deflate" bodies without one are raw deflate. */
static bool
has_zlib_header(struct gw_str in)
{
    const unsigned char *p = (const unsigned char *)in.ptr;

    return in.len >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 &&
           ((unsigned)p[0] << 8 | p[1]) % 31 == 0;
}

static enum gw_code
step_zlib(struct dec *d, struct gw_str in, struct gw_buf *out)
{
    /* gzip: 15 + 32 detects a gzip or a zlib header; deflate: zlib, else raw (-15) */
    int wbits = d->coding == CODING_GZIP ? 15 + 32 : has_zlib_header(in) ? 15 : -15;
    size_t left = in.len; /* bytes not yet handed to zlib */
    size_t room;
    enum gw_code rc;
    z_stream z;
    int zr;

    memset(&z, 0, sizeof(z));
    z.zalloc = z_alloc;
    z.zfree = z_free;
    zr = inflateInit2(&z, wbits);
    if (zr != Z_OK)
        return zr == Z_MEM_ERROR ? GW_E_NOMEM : GW_E_INTERNAL;
    z.next_in = (const Bytef *)in.ptr;
    for (;;) {
        rc = out_room(d, out, in.len);
        if (rc != GW_OK)
            break;
        if (z.avail_in == 0 && left) {
            z.avail_in = left < DECODE_ZLIB_CHUNK ? (uInt)left : DECODE_ZLIB_CHUNK;
            left -= z.avail_in;
        }
        z.next_out = (Bytef *)out->data + out->len;
        room = out->cap - 1 - out->len;
        z.avail_out = room < DECODE_ZLIB_CHUNK ? (uInt)room : DECODE_ZLIB_CHUNK;
        zr = inflate(&z, Z_NO_FLUSH);
        out->len = (size_t)((char *)z.next_out - out->data);
        if (zr == Z_STREAM_END) {
            size_t rest = z.avail_in + left;

            if (rest == 0) {
                rc = out->len > d->lim->max ? GW_E_BODY_TOO_LARGE : GW_OK;
                break;
            }
            /* gzip members may follow one another (RFC 1952 2.2) */
            if (d->coding == CODING_GZIP && rest >= 2 && z.next_in[0] == 0x1f &&
                z.next_in[1] == 0x8b) {
                zr = inflateReset(&z);
                if (zr == Z_OK)
                    continue;
            }
            rc = bad(d, "bytes follow the end of its data");
            break;
        }
        if (zr == Z_MEM_ERROR) {
            rc = GW_E_NOMEM;
            break;
        }
        if (zr == Z_NEED_DICT) {
            rc = bad(d, "it needs a preset dictionary");
            break;
        }
        if (zr == Z_DATA_ERROR) {
            rc = bad(d, z.msg ? z.msg : "corrupt data");
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = GW_E_INTERNAL;
            break;
        }
        /* every byte taken, room left, and the stream not at its end: it was cut */
        if (z.avail_in == 0 && left == 0 && z.avail_out > 0) {
            rc = bad(d, "it ends before its data does (truncated)");
            break;
        }
    }
    inflateEnd(&z);
    return rc;
}

/* ---- br (libbrotlidec) ---- */

static void *
br_alloc(void *opaque, size_t size)
{
    (void)opaque;
    return gw_malloc(size);
}

static void
br_free(void *opaque, void *p)
{
    (void)opaque;
    gw_free(p);
}

static enum gw_code
step_br(struct dec *d, struct gw_str in, struct gw_buf *out)
{
    BrotliDecoderState *st = BrotliDecoderCreateInstance(br_alloc, br_free, NULL);
    const uint8_t *next_in = (const uint8_t *)in.ptr;
    size_t avail_in = in.len;
    enum gw_code rc;

    if (!st)
        return GW_E_NOMEM;
    for (;;) {
        BrotliDecoderResult r;
        BrotliDecoderErrorCode e;
        uint8_t *next_out;
        size_t avail_out;

        rc = out_room(d, out, in.len);
        if (rc != GW_OK)
            break;
        next_out = (uint8_t *)out->data + out->len;
        avail_out = out->cap - 1 - out->len;
        r = BrotliDecoderDecompressStream(st, &avail_in, &next_in, &avail_out, &next_out, NULL);
        out->len = (size_t)((char *)next_out - out->data);
        if (r == BROTLI_DECODER_RESULT_SUCCESS) {
            if (avail_in)
                rc = bad(d, "bytes follow the end of its data");
            else
                rc = out->len > d->lim->max ? GW_E_BODY_TOO_LARGE : GW_OK;
            break;
        }
        if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT)
            continue;
        if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) {
            rc = bad(d, "it ends before its data does (truncated)");
            break;
        }
        e = BrotliDecoderGetErrorCode(st);
        if (e <= BROTLI_DECODER_ERROR_ALLOC_CONTEXT_MODES &&
            e >= BROTLI_DECODER_ERROR_ALLOC_BLOCK_TYPE_TREES) {
            rc = GW_E_NOMEM;
        } else {
            /* "_ERROR_FORMAT_PADDING_1" reads "corrupt data (brotli FORMAT_PADDING_1)" */
            const char *name = BrotliDecoderErrorString(e);

            if (strncmp(name, "_ERROR_", 7) == 0)
                name += 7;
            (void)gw_buf_printf(d->why,
                                "the request body is not valid br: corrupt data (brotli %s)", name);
            rc = GW_E_BAD_REQUEST;
        }
        break;
    }
    BrotliDecoderDestroyInstance(st);
    return rc;
}

/* ---- zstd (libzstd) ---- */

static void *
zs_alloc(void *opaque, size_t size)
{
    (void)opaque;
    return gw_malloc(size);
}

static void
zs_free(void *opaque, void *p)
{
    (void)opaque;
    gw_free(p);
}

/* The window log zstd may use for a body of at most <max> bytes: a window larger than
 * the body serves nothing, but compressors pick theirs without knowing the size. */
static int
zstd_wlog(size_t max)
{
    int wlog = DECODE_ZSTD_WLOG_MIN;

    while (wlog < DECODE_ZSTD_WLOG_MAX && ((size_t)1 << wlog) < max)
        wlog++;
    return wlog;
}

static enum gw_code
step_zstd(struct dec *d, struct gw_str in, struct gw_buf *out)
{
    static const ZSTD_customMem mem = {zs_alloc, zs_free, NULL};
    ZSTD_DCtx *z = ZSTD_createDCtx_advanced(mem);
    ZSTD_inBuffer zin = {in.ptr, in.len, 0};
    unsigned long long fcs = ZSTD_CONTENTSIZE_UNKNOWN; /* the frame's declared size */
    size_t frame_at = 0;                               /* out->len where it began */
    bool frame_start = true;
    enum gw_code rc;

    if (!z)
        return GW_E_NOMEM;
    if (ZSTD_isError(ZSTD_DCtx_setParameter(z, ZSTD_d_windowLogMax, zstd_wlog(d->lim->max)))) {
        ZSTD_freeDCtx(z);
        return GW_E_INTERNAL;
    }
    for (;;) {
        ZSTD_outBuffer zout;
        size_t zr;

        if (frame_start) {
            /* A frame that states its size (most do) is refused by it at once, before
             * anything is allocated, when it would pass the limit; a header too broken
             * to read is the decoder's to report. */
            fcs = ZSTD_getFrameContentSize((const char *)zin.src + zin.pos, zin.size - zin.pos);
            if (fcs == ZSTD_CONTENTSIZE_ERROR)
                fcs = ZSTD_CONTENTSIZE_UNKNOWN;
            if (out->len > d->lim->max ||
                (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs > d->lim->max - out->len)) {
                rc = GW_E_BODY_TOO_LARGE;
                break;
            }
            frame_at = out->len;
            frame_start = false;
        }
        rc = out_room(d, out, in.len);
        if (rc != GW_OK)
            break;
        zout = (ZSTD_outBuffer){out->data, out->cap - 1, out->len};
        zr = ZSTD_decompressStream(z, &zout, &zin);
        out->len = zout.pos;
        if (ZSTD_isError(zr)) {
            ZSTD_ErrorCode e = ZSTD_getErrorCode(zr);

            if (e == ZSTD_error_memory_allocation) {
                rc = GW_E_NOMEM;
            } else if (e == ZSTD_error_frameParameter_windowTooLarge) {
                (void)gw_buf_printf(d->why,
                                    "the request body is not valid zstd: its window is "
                                    "larger than the gateway decodes (%zu bytes)",
                                    (size_t)1 << zstd_wlog(d->lim->max));
                rc = GW_E_BAD_REQUEST;
            } else {
                rc = bad(d, ZSTD_getErrorName(zr));
            }
            break;
        }
        if (zr == 0) { /* a frame ended */
            /* libzstd checks the stated size in most paths, not after an empty last
             * block: checked here, so that the answer never depends on buffer sizes */
            if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && out->len - frame_at != fcs) {
                rc = bad(d, "a frame's data differs in size from what its header states");
                break;
            }
            frame_start = true;
            if (zin.pos == zin.size) {
                rc = out->len > d->lim->max ? GW_E_BODY_TOO_LARGE : GW_OK;
                break;
            }
        }
        /* more frames may follow; a frame still open with every byte taken and room
         * left was cut */
        if (zr != 0 && zin.pos == zin.size && zout.pos < zout.size) {
            rc = bad(d, "it ends before its data does (truncated)");
            break;
        }
    }
    ZSTD_freeDCtx(z);
    return rc;
}

/* ---- the steps ---- */

static enum gw_code
step(struct dec *d, struct gw_str in, struct gw_buf *out)
{
    if (in.len == 0)
        return GW_OK; /* nothing was encoded */
    switch (d->coding) {
    case CODING_GZIP:
    case CODING_DEFLATE: return step_zlib(d, in, out);
    case CODING_BR: return step_br(d, in, out);
    case CODING_ZSTD: return step_zstd(d, in, out);
    }
    return GW_E_INTERNAL;
}

enum gw_code
gw_decode_body(struct gw_str codings, struct gw_str in, const struct gw_decode_limit *lim,
               struct gw_buf *out, struct gw_buf *why)
{
    enum coding list[GW_DECODE_MAX_CODINGS];
    struct gw_buf cur = {0}, next = {0};
    struct dec d = {lim, 0, why, CODING_GZIP};
    enum gw_code rc;
    size_t n, i;

    memset(out, 0, sizeof(*out));
    rc = parse_codings(codings, list, &n, why);
    if (rc != GW_OK)
        return rc;
    /* Applied in the order listed (RFC 9110 8.4): undone from the last. Each step reads
     * the one before's output, which is freed as soon as it is read. */
    for (i = n; i-- > 0;) {
        d.coding = list[i];
        rc = step(&d, i == n - 1 ? in : (struct gw_str){cur.data, cur.len}, &next);
        out_free(&d, &cur);
        if (rc != GW_OK) {
            out_free(&d, &next);
            if (rc == GW_E_BODY_TOO_LARGE)
                (void)gw_buf_printf(why, "the request body decodes to more than %zu bytes",
                                    lim->max);
            return rc;
        }
        cur = next;
        memset(&next, 0, sizeof(next));
    }
    if (n == 0 && in.len) { /* identity only: the body as it is, bounded all the same */
        if (in.len > lim->max) {
            (void)gw_buf_printf(why, "the request body is longer than %zu bytes", lim->max);
            return GW_E_BODY_TOO_LARGE;
        }
        if (!hold_to(&d, in.len + 1)) {
            (void)gw_buf_append_cstr(why, "the gateway cannot hold the request body now; "
                                          "retry shortly");
            return GW_E_BUSY;
        }
        cur.data = gw_malloc(in.len + 1);
        if (!cur.data) {
            (void)hold_to(&d, 0);
            return GW_E_NOMEM;
        }
        cur.cap = in.len + 1;
        memcpy(cur.data, in.ptr, in.len);
        cur.len = in.len;
    }
    if (cur.data && cur.cap > cur.len + 1) {
        /* Give back the doubling's spare room: the body is held for the whole request
         * (a shrink that fails keeps the larger buffer; it is not an error). */
        char *p = gw_realloc(cur.data, cur.len + 1);

        if (p) {
            cur.data = p;
            cur.cap = cur.len + 1;
            (void)hold_to(&d, cur.cap);
        }
    }
    if (cur.data)
        cur.data[cur.len] = '\0';
    *out = cur;
    return GW_OK;
}
