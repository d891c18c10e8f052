/* SPDX-License-Identifier: MIT
 * dialects/bedrock_stream.c - the binary eventstream framing of Bedrock's
 * ConverseStream (application/vnd.amazon.eventstream): messages cut anywhere by the
 * network put back together, both CRC32s checked, headers read; and the encoder the
 * tests and fuzz seeds use.
 * A message whose bytes are all in one read is decoded in place; only one that spans
 * reads is copied, into the state's buffer (reserved once at its full length, which the
 * prelude gives and max_message bounds). CRC32 is zlib's crc32_z (the IEEE polynomial
 * AWS uses): the only zlib call here (tools/check-deps.sh exception).
 * Pure: no I/O, no clock.
 * Owns:    the state's buffer, until dl_bedrock_es_fini.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/bedrock.h, tests/unit/dialects/test_bedrock_stream.c,
 *          tests/fuzz/fuzz_bedrock_es.c
 */
#include "dialects/bedrock.h"

#include <string.h>

#include <zlib.h>

/* Total length, headers length, prelude CRC: 12 bytes; the message CRC: 4 more. */
#define ES_PRELUDE 12u
#define ES_MIN_TOTAL 16u

/* ---- bytes ---- */

static uint32_t
be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static void
put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static uint32_t
crc(const char *p, size_t n)
{
    return (uint32_t)crc32_z(0, (const Bytef *)p, n);
}

/* ---- prelude and headers ---- */

/* The prelude at <p> (12 bytes): its CRC, then lengths that can be. *total is set. */
static enum gw_code
check_prelude(const struct dl_bedrock_es *s, const char *p, uint32_t *total)
{
    uint32_t t = be32(p), h = be32(p + 4);

    if (crc(p, 8) != be32(p + 8))
        return GW_E_UPSTREAM_PROTOCOL;
    if (t < ES_MIN_TOTAL || t > s->max_message || h > t - ES_MIN_TOTAL)
        return GW_E_UPSTREAM_PROTOCOL;
    *total = t;
    return GW_OK;
}

/* Bytes a value of <type> takes after the type byte, length prefix excluded; -1 for a
 * type the format does not have, -2 for the two with a u16 length. */
static int
value_size(unsigned type)
{
    static const int sizes[] = {0, 0, 1, 2, 4, 8, -2, -2, 8, 16};

    return type < sizeof sizes / sizeof sizes[0] ? sizes[type] : -1;
}

/* The string headers the stream's readers look up, by name. */
static void
note_known(struct dl_bedrock_es_msg *m, const struct dl_bedrock_es_header *h)
{
    static const struct {
        const char *name;
        size_t off;
    } known[] = {
        {":message-type", offsetof(struct dl_bedrock_es_msg, message_type)},
        {":event-type", offsetof(struct dl_bedrock_es_msg, event_type)},
        {":exception-type", offsetof(struct dl_bedrock_es_msg, exception_type)},
        {":error-code", offsetof(struct dl_bedrock_es_msg, error_code)},
        {":error-message", offsetof(struct dl_bedrock_es_msg, error_message)},
        {":content-type", offsetof(struct dl_bedrock_es_msg, content_type)},
    };
    size_t i;

    if (h->type != DL_BEDROCK_ES_STRING)
        return;
    for (i = 0; i < sizeof known / sizeof known[0]; i++)
        if (gw_str_eq(h->name, gw_str_c(known[i].name)))
            *(struct gw_str *)((char *)m + known[i].off) = h->value;
}

/* Reads one header at <p>[*at], <end> the end of the headers block. */
static enum gw_code
read_header(const char *p, size_t *at, size_t end, struct dl_bedrock_es_header *h)
{
    size_t i = *at, nlen, vlen;
    int size;

    nlen = (unsigned char)p[i++];
    if (end - i < nlen + 1) /* the name and the type byte */
        return GW_E_UPSTREAM_PROTOCOL;
    h->name = (struct gw_str){p + i, nlen};
    i += nlen;
    size = value_size((unsigned char)p[i]);
    h->type = (enum dl_bedrock_es_type)(unsigned char)p[i++];
    if (size == -1)
        return GW_E_UPSTREAM_PROTOCOL;
    if (size == -2) {
        if (end - i < 2)
            return GW_E_UPSTREAM_PROTOCOL;
        vlen = (size_t)((unsigned char)p[i] << 8 | (unsigned char)p[i + 1]);
        i += 2;
    } else {
        vlen = (size_t)size;
    }
    if (end - i < vlen)
        return GW_E_UPSTREAM_PROTOCOL;
    h->value = (struct gw_str){p + i, vlen};
    *at = i + vlen;
    return GW_OK;
}

/* Decodes the complete message <p> of <total> bytes (its prelude already checked). */
static enum gw_code
decode(const char *p, uint32_t total, struct dl_bedrock_es_msg *m)
{
    size_t end = ES_PRELUDE + be32(p + 4), at = ES_PRELUDE;

    if (crc(p, total - 4) != be32(p + total - 4))
        return GW_E_UPSTREAM_PROTOCOL;
    memset(m, 0, sizeof *m);
    while (at < end) {
        if (m->n_hdrs == DL_BEDROCK_ES_MAX_HEADERS)
            return GW_E_UPSTREAM_PROTOCOL;
        if (read_header(p, &at, end, &m->hdrs[m->n_hdrs]) != GW_OK)
            return GW_E_UPSTREAM_PROTOCOL;
        note_known(m, &m->hdrs[m->n_hdrs++]);
    }
    m->payload = (struct gw_str){p + end, total - 4 - end};
    return GW_OK;
}

/* ---- the decoder ---- */

void
dl_bedrock_es_init(struct dl_bedrock_es *p, size_t max_message)
{
    *p = (struct dl_bedrock_es){.max_message = max_message};
}

void
dl_bedrock_es_fini(struct dl_bedrock_es *p)
{
    gw_buf_fini(&p->buf);
}

bool
dl_bedrock_es_partial(const struct dl_bedrock_es *p)
{
    return p->buf.len > 0;
}

/* Decodes the complete message at <msg> and hands it to <fn>; *stop when <fn> said so. */
static enum gw_code
deliver(const char *msg, uint32_t total, dl_bedrock_es_fn fn, void *arg, bool *stop)
{
    struct dl_bedrock_es_msg m;
    enum gw_code rc = decode(msg, total, &m);

    if (rc == GW_OK)
        *stop = fn(arg, &m) != 0;
    return rc;
}

/* Moves bytes of <*data> into the held message: the prelude first, then (reserving the
 * whole message once its length is known and good) the rest. *total is set once the
 * prelude is whole; 0 before. */
static enum gw_code
hold(struct dl_bedrock_es *p, const char **data, size_t *len, uint32_t *total)
{
    size_t want, n;
    enum gw_code rc;

    *total = 0;
    if (p->buf.len < ES_PRELUDE) {
        n = ES_PRELUDE - p->buf.len < *len ? ES_PRELUDE - p->buf.len : *len;
        if ((rc = gw_buf_append(&p->buf, *data, n)) != GW_OK)
            return rc;
        *data += n;
        *len -= n;
        if (p->buf.len < ES_PRELUDE)
            return GW_OK;
    }
    if ((rc = check_prelude(p, p->buf.data, total)) != GW_OK)
        return rc;
    if ((rc = gw_buf_reserve(&p->buf, *total - p->buf.len)) != GW_OK)
        return rc;
    want = *total - p->buf.len;
    n = want < *len ? want : *len;
    gw_buf_append(&p->buf, *data, n); /* room reserved: cannot fail */
    *data += n;
    *len -= n;
    return GW_OK;
}

/* One step of the feed: finishes the held message, or decodes one whole message in
 * place, or starts holding the rest of <data>. */
static enum gw_code
step(struct dl_bedrock_es *p, const char **data, size_t *len, dl_bedrock_es_fn fn, void *arg,
     bool *stop)
{
    uint32_t total;
    enum gw_code rc;

    if (p->buf.len == 0 && *len >= ES_PRELUDE) {
        if ((rc = check_prelude(p, *data, &total)) != GW_OK)
            return rc;
        if (*len >= total) { /* whole in this read: no copy */
            const char *msg = *data;

            *data += total;
            *len -= total;
            return deliver(msg, total, fn, arg, stop);
        }
    }
    if ((rc = hold(p, data, len, &total)) != GW_OK)
        return rc;
    if (total == 0 || p->buf.len < total)
        return GW_OK; /* all of <data> is held; the message waits for more */
    rc = deliver(p->buf.data, total, fn, arg, stop);
    gw_buf_reset(&p->buf); /* the spanning buffer is kept for the next one */
    return rc;
}

enum gw_code
dl_bedrock_es_feed(struct dl_bedrock_es *p, const char *data, size_t len, dl_bedrock_es_fn fn,
                   void *arg)
{
    bool stop = false;
    enum gw_code rc = GW_OK;

    if (p->broken)
        return GW_E_UPSTREAM_PROTOCOL;
    while (len > 0 && !stop && rc == GW_OK)
        rc = step(p, &data, &len, fn, arg, &stop);
    /* A bad frame leaves no boundary to resume at; out of memory is as final, since
     * the bytes already taken cannot be given back. */
    if (rc != GW_OK)
        p->broken = true;
    return rc;
}

/* ---- reading a message, encoding one ---- */

void
dl_bedrock_es_event(const struct dl_bedrock_es_msg *m, struct gw_str *event, struct gw_str *data)
{
    *event = (struct gw_str){"", 0};
    *data = m->payload;
    if (m->message_type.len == 0 || gw_str_eq(m->message_type, GW_STR_LIT("event"))) {
        *event = m->event_type;
    } else if (gw_str_eq(m->message_type, GW_STR_LIT("exception"))) {
        *event = m->exception_type;
    } else if (gw_str_eq(m->message_type, GW_STR_LIT("error"))) {
        *event = GW_STR_LIT("error");
        *data = m->error_message;
    }
}

/* Bytes <h> takes encoded; 0 when it cannot be (a name over 255 bytes, a value whose
 * size its type does not allow). */
static size_t
header_size(const struct dl_bedrock_es_header *h)
{
    int size = value_size((unsigned)h->type);

    if (h->name.len > 255 || size == -1)
        return 0;
    if (size == -2)
        return h->value.len > 65535 ? 0 : 1 + h->name.len + 1 + 2 + h->value.len;
    return h->value.len != (size_t)size ? 0 : 1 + h->name.len + 1 + h->value.len;
}

static void
write_header(char *w, const struct dl_bedrock_es_header *h)
{
    *w++ = (char)h->name.len;
    if (h->name.len)
        memcpy(w, h->name.ptr, h->name.len);
    w += h->name.len;
    *w++ = (char)h->type;
    if (value_size((unsigned)h->type) == -2) {
        *w++ = (char)(h->value.len >> 8);
        *w++ = (char)h->value.len;
    }
    if (h->value.len)
        memcpy(w, h->value.ptr, h->value.len);
}

enum gw_code
dl_bedrock_es_encode(struct gw_buf *out, const struct dl_bedrock_es_header *hdrs, size_t n_hdrs,
                     struct gw_str payload)
{
    size_t hlen = 0, total, i, sz;
    char *w;

    for (i = 0; i < n_hdrs; i++) {
        if ((sz = header_size(&hdrs[i])) == 0)
            return GW_E_BAD_REQUEST;
        hlen += sz;
    }
    total = ES_MIN_TOTAL + hlen + payload.len;
    if (total > UINT32_MAX)
        return GW_E_BAD_REQUEST;
    if (gw_buf_reserve(out, total) != GW_OK)
        return GW_E_NOMEM;
    w = out->data + out->len;
    put_be32(w, (uint32_t)total);
    put_be32(w + 4, (uint32_t)hlen);
    put_be32(w + 8, crc(w, 8));
    for (i = 0, sz = ES_PRELUDE; i < n_hdrs; sz += header_size(&hdrs[i]), i++)
        write_header(w + sz, &hdrs[i]);
    if (payload.len)
        memcpy(w + sz, payload.ptr, payload.len);
    put_be32(w + total - 4, crc(w, total - 4));
    out->len += total;
    out->data[out->len] = '\0';
    return GW_OK;
}
