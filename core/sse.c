/* SPDX-License-Identifier: MIT
 * core/sse.c - incremental Server-Sent Events parser (WHATWG event-stream rules).
 * Pure: no I/O, no clock. A feed is scanned once for blank lines, line ends sixteen
 * bytes a step (each byte is looked at once by the scanner and once more when its event
 * is dispatched, except the first line's, whose end the scanner hands over), so a
 * stream costs O(n) however it is split. Whole events inside one feed are delivered straight
 * from the caller's buffer; only the partial event at the end of a feed is copied.
 * Owns:    <pending> (the partial event) and <data> (scratch for joined data lines).
 * Threads: one stream on one thread.
 * See:     core/sse.h, tests/unit/core/test_sse.c, tests/fuzz/fuzz_sse.c
 */
#include "core/sse.h"

#include <stdbool.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SSE_DEFAULT_MAX ((size_t)8 << 20)

/* Bits of <state>. Zero is "stream start, at the start of a line". */
#define SSE_ST_BOM_DONE 0x01  /* the BOM check at stream start is over */
#define SSE_ST_LAST_CR 0x02   /* the last byte scanned was a CR (an LF next is its pair) */
#define SSE_ST_MIDLINE 0x04   /* the last byte scanned was not a line end */
#define SSE_ST_FAILED 0x08    /* an event was too large: the stream is dead */
#define SSE_ST_SKIP_SHIFT 4   /* bytes at the start of the event that belong to no line: */
#define SSE_ST_SKIP_MASK 0x30 /* a BOM (3) or the LF of a CRLF split over two feeds (1) */

#define SSE_SKIP(st) ((size_t)(((st)&SSE_ST_SKIP_MASK) >> SSE_ST_SKIP_SHIFT))

static const char sse_bom[3] = {'\xEF', '\xBB', '\xBF'};

void
gw_sse_init(struct gw_sse *p, size_t max_event)
{
    memset(p, 0, sizeof(*p));
    p->max_event = max_event ? max_event : SSE_DEFAULT_MAX;
}

void
gw_sse_fini(struct gw_sse *p)
{
    gw_buf_fini(&p->pending);
    gw_buf_fini(&p->data);
    p->scan = 0;
    p->state = 0;
}

/* The first line end (CR or LF) in s[i..n), or n: sixteen bytes a step, and a tail
 * shorter than that as the last sixteen bytes of <s> (those before i masked off) when
 * <s> has that many, so that a short event's line is not walked a byte at a time. */
static size_t
eol_from(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
    const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
    unsigned m;

    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));

        m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, lf), _mm_cmpeq_epi8(x, cr)));
        if (m)
            return i + (size_t)__builtin_ctz(m);
    }
    if (i < n && n >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 16));

        m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, lf), _mm_cmpeq_epi8(x, cr)));
        m &= ~0u << (i - (n - 16));
        return m ? n - 16 + (size_t)__builtin_ctz(m) : n;
    }
#endif
    while (i < n && s[i] != '\n' && s[i] != '\r')
        i++;
    return i;
}

/* ---- one event ---- */

static bool
field_is(const char *f, size_t n, const char *name)
{
    size_t k = strlen(name);

    return n == k && memcmp(f, name, k) == 0;
}

/* No first line end known (the scanner saw the event's start in an earlier feed). */
#define SSE_EOL_UNKNOWN ((size_t)-1)

/* Splits the complete event <raw> (terminating blank line included; its first <skip>
 * bytes belong to no line) into fields and calls <fn>. <eol1> is the offset in <raw> of
 * its first line's end when the scanner found it, so that the usual one-line event is
 * not measured twice. Returns the callback's value, or -1 with *rc set when out of
 * memory. */
static int
dispatch(struct gw_sse *p, struct gw_str raw, size_t skip, size_t eol1, gw_sse_event_fn fn,
         void *arg, enum gw_code *rc)
{
    struct gw_sse_event ev;
    struct gw_str first = {"", 0};
    size_t i = skip, ndata = 0;

    ev.raw = raw;
    ev.event = (struct gw_str){"", 0};
    ev.id = (struct gw_str){"", 0};
    gw_buf_reset(&p->data);
    while (i < raw.len) {
        const char *line = raw.ptr + i, *colon;
        size_t n = (eol1 != SSE_EOL_UNKNOWN ? eol1 : eol_from(raw.ptr, i, raw.len)) - i, fl, vo;

        eol1 = SSE_EOL_UNKNOWN;
        i += n;
        if (i < raw.len && raw.ptr[i++] == '\r' && i < raw.len && raw.ptr[i] == '\n')
            i++; /* CRLF is one line end */
        if (n == 0)
            break; /* the blank line that ends the event */
        if (line[0] == ':')
            continue; /* comment */
        colon = memchr(line, ':', n);
        fl = colon ? (size_t)(colon - line) : n;
        vo = colon ? fl + 1 : n;
        if (vo < n && line[vo] == ' ')
            vo++;
        if (field_is(line, fl, "data")) {
            struct gw_str v = {line + vo, n - vo};

            /* One data line (the usual case) is a slice of raw; more are joined. */
            if (ndata == 0) {
                first = v;
            } else {
                if (ndata == 1 && (gw_buf_append_str(&p->data, first) != GW_OK))
                    goto nomem;
                if (gw_buf_append(&p->data, "\n", 1) != GW_OK ||
                    gw_buf_append_str(&p->data, v) != GW_OK)
                    goto nomem;
            }
            ndata++;
        } else if (field_is(line, fl, "event")) {
            ev.event = (struct gw_str){line + vo, n - vo};
        } else if (field_is(line, fl, "id")) {
            /* WHATWG: an id containing NUL is ignored. */
            if (!memchr(line + vo, '\0', n - vo))
                ev.id = (struct gw_str){line + vo, n - vo};
        }
        /* "retry" and unknown fields are ignored. */
    }
    if (ndata > 1)
        ev.data = (struct gw_str){p->data.data, p->data.len};
    else
        ev.data = first;
    return fn(arg, &ev);
nomem:
    *rc = GW_E_NOMEM;
    return -1;
}

/* ---- scanning ---- */

/* Scans <s>/<n> (the pending event followed by new bytes, or new bytes alone when
 * nothing was pending) from p->scan, dispatching each complete event. Sets <*used> to
 * the bytes delivered (the start of what stays pending) and p->scan relative to it. */
static enum gw_code
scan_region(struct gw_sse *p, const char *s, size_t n, gw_sse_event_fn fn, void *arg, size_t *used,
            bool *stopped)
{
    size_t start = 0, i = p->scan, eol1 = SSE_EOL_UNKNOWN;
    bool eol1_next = i == 0; /* the next line end is the event's first, its offset known */
    int st = p->state;
    enum gw_code rc = GW_OK;

    *stopped = false;
    *used = 0;
    if (!(st & SSE_ST_BOM_DONE)) {
        size_t k = n < 3 ? n : 3;

        if (memcmp(s, sse_bom, k) == 0 && k < 3) {
            *used = 0; /* a BOM prefix so far: wait for more */
            p->scan = 0;
            return GW_OK;
        }
        st |= SSE_ST_BOM_DONE;
        if (k == 3 && memcmp(s, sse_bom, 3) == 0) {
            st |= 3 << SSE_ST_SKIP_SHIFT;
            i = 3;
        }
    }
    for (; i < n; i++) {
        char c = s[i];
        int st_in = st, r;
        size_t end;

        if (c == '\n' && (st & SSE_ST_LAST_CR)) {
            /* The LF of a CRLF. At an event's start, its CR ended the previous event
             * (split between feeds): the LF goes with this event's raw, in no line. */
            st &= ~SSE_ST_LAST_CR;
            if (i == start)
                st = (st & ~SSE_ST_SKIP_MASK) | (1 << SSE_ST_SKIP_SHIFT);
            continue;
        }
        st &= ~SSE_ST_LAST_CR;
        if (c != '\n' && c != '\r') {
            /* the rest of the line up to its end changes nothing more */
            st |= SSE_ST_MIDLINE;
            i = eol_from(s, i + 1, n) - 1;
            continue;
        }
        if (eol1_next) {
            eol1 = i - start;
            eol1_next = false;
        }
        if (c == '\r')
            st |= SSE_ST_LAST_CR;
        if (st & SSE_ST_MIDLINE) {
            st &= ~SSE_ST_MIDLINE; /* end of a non-empty line */
            continue;
        }
        /* An empty line: the event ends here. The limit counts neither the skipped
         * bytes (a BOM, an LF left over from the previous event) nor the LF of a final
         * CRLF, so that it does not depend on how the stream was split. */
        end = i + 1;
        if (end - start - SSE_SKIP(st) > p->max_event) {
            p->state = st | SSE_ST_FAILED;
            *used = start;
            return GW_E_UPSTREAM_PROTOCOL;
        }
        if (c == '\r' && end < n && s[end] == '\n') {
            end++; /* keep the LF of the CRLF when it is here */
            st &= ~SSE_ST_LAST_CR;
        }
        r = dispatch(p, (struct gw_str){s + start, end - start}, SSE_SKIP(st), eol1, fn, arg, &rc);
        if (rc != GW_OK) {
            /* Undo this blank line so that the next feed dispatches the event again. */
            p->state = st_in;
            *used = start;
            p->scan = i - start;
            return rc;
        }
        st &= ~SSE_ST_SKIP_MASK;
        start = end;
        eol1_next = true;
        i = end - 1;
        if (r != 0) {
            *stopped = true;
            i = end;
            break;
        }
    }
    p->state = st;
    *used = start;
    p->scan = i - start;
    if (!*stopped && n - start - SSE_SKIP(st) > p->max_event) {
        p->state |= SSE_ST_FAILED;
        return GW_E_UPSTREAM_PROTOCOL;
    }
    return GW_OK;
}

enum gw_code
gw_sse_feed(struct gw_sse *p, const char *buf, size_t len, gw_sse_event_fn fn, void *arg)
{
    enum gw_code rc;
    size_t used;
    bool stopped;

    if (p->state & SSE_ST_FAILED)
        return GW_E_UPSTREAM_PROTOCOL;
    if (p->pending.len == 0) {
        /* Nothing pending: deliver straight from <buf>, keep only the tail. */
        if (len == 0)
            return GW_OK;
        rc = scan_region(p, buf, len, fn, arg, &used, &stopped);
        if (rc == GW_E_UPSTREAM_PROTOCOL)
            return rc;
        if (used < len && gw_buf_append(&p->pending, buf + used, len - used) != GW_OK) {
            /* The partial event is lost: start the next feed at an event boundary. */
            p->scan = 0;
            p->state &= ~(SSE_ST_MIDLINE | SSE_ST_LAST_CR | SSE_ST_SKIP_MASK);
            return GW_E_NOMEM;
        }
        return rc;
    }
    if (len && gw_buf_append(&p->pending, buf, len) != GW_OK)
        return GW_E_NOMEM;
    rc = scan_region(p, p->pending.data, p->pending.len, fn, arg, &used, &stopped);
    gw_buf_consume(&p->pending, used);
    return rc;
}
