/* SPDX-License-Identifier: MIT
 * store/codec.c - the stored shape of a request row and of the by_client key.
 * A row value is: one version byte (STORE_ROW_ENC_VERSION), then its fields in a fixed
 * order. Unsigned integers are LEB128 varints, signed ones zigzag varints, the speed an
 * 8-byte little-endian IEEE double, flags one byte, strings a varint length then the
 * bytes (no NUL). Version 1 fields, in order:
 *   id, ts_ms, client, model, upstream, status, code, outcome, stream,
 *   usage.{input,output,cache_read,cache_write}_tokens, usage.estimated,
 *   cost_micros (signed), ttfb_ms (signed), duration_ms, queued_ms, tokens_per_sec,
 *   n_attempts, then per attempt: upstream, model, outcome, status, code, queued_ms,
 *   ttfb_ms (signed).
 * Version 2 appends: dropped (the fields a conversion dropped, a string).
 * Version 3 appends: usage.reasoning_tokens.
 * Version 4 appends: per attempt (n_attempts of them, in order), cred (the fingerprint of
 * the credential the hop sent, core/quota.h; "" when none), a string.
 * Extending: a new field is appended at the end and the version byte raised; a reader
 * decodes the fields it knows and ignores trailing bytes, so older rows (missing the
 * new field, which then reads as zero) and newer rows both stay readable.
 * A stored response value (store/resp.c) is a head, then the items JSON bytes as given:
 *   byte 0     version (STORE_RESP_ENC_VERSION)
 *   byte 1     head length H: the items start at byte H
 *   byte 2     upstream shape (the caller's small integer)
 *   byte 3     flags (none defined yet; readers ignore unknown bits)
 *   bytes 4-11 be64 ts_ms
 *   byte 12    provider name length P (<= GW_NAME_MAX), then its P bytes
 * Version 2 appends: the client's name length C (<= GW_NAME_MAX), then its C bytes (the
 *   gateway key whose request made it; only that client may continue it).
 * A later version appends head fields after the name and raises H; a reader uses the
 * fields it knows and starts the items at H, so both stay readable. The response id is
 * the key, not repeated in the value.
 * Owns:    nothing. Pure: no I/O.
 * Threads: any.
 * See:     store/store-priv.h, store/store.c
 */
#include "store/store-priv.h"

#include <string.h>

/* ---- writer side ---- */

struct enc {
    unsigned char *p;
    size_t len;
    size_t cap;
    bool full;
};

static void
enc_byte(struct enc *e, unsigned char b)
{
    if (e->len >= e->cap) {
        e->full = true;
        return;
    }
    e->p[e->len++] = b;
}

static void
enc_uv(struct enc *e, uint64_t v)
{
    while (v >= 0x80) {
        enc_byte(e, (unsigned char)(v | 0x80));
        v >>= 7;
    }
    enc_byte(e, (unsigned char)v);
}

static void
enc_sv(struct enc *e, int64_t v)
{
    /* zigzag: small magnitudes of either sign stay short */
    enc_uv(e, ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0));
}

static void
enc_str(struct enc *e, const char *s, size_t field_size)
{
    size_t n = strnlen(s, field_size - 1);

    enc_uv(e, n);
    if (e->len + n > e->cap) {
        e->full = true;
        return;
    }
    memcpy(e->p + e->len, s, n);
    e->len += n;
}

static void
enc_f64(struct enc *e, double d)
{
    uint64_t bits;

    memcpy(&bits, &d, sizeof bits);
    for (int i = 0; i < 8; i++) {
        enc_byte(e, (unsigned char)(bits & 0xff));
        bits >>= 8;
    }
}

size_t
store_row_encode(const struct gw_row *row, unsigned char *buf, size_t cap)
{
    struct enc e = {.p = buf, .cap = cap};
    unsigned n_att = row->n_attempts;

    if (n_att > GW_ROW_MAX_ATTEMPTS)
        n_att = GW_ROW_MAX_ATTEMPTS;
    enc_byte(&e, STORE_ROW_ENC_VERSION);
    enc_str(&e, row->id, sizeof row->id);
    enc_uv(&e, row->ts_ms);
    enc_str(&e, row->client, sizeof row->client);
    enc_str(&e, row->model, sizeof row->model);
    enc_str(&e, row->upstream, sizeof row->upstream);
    enc_uv(&e, row->status);
    enc_uv(&e, row->code);
    enc_byte(&e, row->outcome);
    enc_byte(&e, row->stream);
    enc_uv(&e, row->usage.input_tokens);
    enc_uv(&e, row->usage.output_tokens);
    enc_uv(&e, row->usage.cache_read_tokens);
    enc_uv(&e, row->usage.cache_write_tokens);
    enc_byte(&e, row->usage.estimated ? 1 : 0);
    enc_sv(&e, row->cost_micros);
    enc_sv(&e, row->ttfb_ms);
    enc_uv(&e, row->duration_ms);
    enc_uv(&e, row->queued_ms);
    enc_f64(&e, row->tokens_per_sec);
    enc_uv(&e, n_att);
    for (unsigned i = 0; i < n_att; i++) {
        const struct gw_attempt *a = &row->attempts[i];

        enc_str(&e, a->upstream, sizeof a->upstream);
        enc_str(&e, a->model, sizeof a->model);
        enc_byte(&e, a->outcome);
        enc_uv(&e, a->status);
        enc_uv(&e, a->code);
        enc_uv(&e, a->queued_ms);
        enc_sv(&e, a->ttfb_ms);
    }
    enc_str(&e, row->dropped, sizeof row->dropped); /* version 2 */
    enc_uv(&e, row->usage.reasoning_tokens);        /* version 3 */
    for (unsigned i = 0; i < n_att; i++)            /* version 4 */
        enc_str(&e, row->attempts[i].cred, sizeof row->attempts[i].cred);
    return e.full ? 0 : e.len;
}

/* ---- reader side ---- */

struct dec {
    const unsigned char *p;
    size_t len;
    size_t off;
    bool bad; /* sticky: once set, every read returns 0 */
};

static unsigned char
dec_byte(struct dec *d)
{
    if (d->bad || d->off >= d->len) {
        d->bad = true;
        return 0;
    }
    return d->p[d->off++];
}

static uint64_t
dec_uv(struct dec *d)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        unsigned char b = dec_byte(d);

        if (d->bad)
            return 0;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    d->bad = true; /* more than 10 bytes: not ours */
    return 0;
}

static uint64_t
dec_uv_max(struct dec *d, uint64_t max)
{
    uint64_t v = dec_uv(d);

    if (v > max) {
        d->bad = true;
        return 0;
    }
    return v;
}

static int64_t
dec_sv(struct dec *d, int64_t min, int64_t max)
{
    uint64_t z = dec_uv(d);
    int64_t v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);

    if (v < min || v > max) {
        d->bad = true;
        return 0;
    }
    return v;
}

static void
dec_str(struct dec *d, char *out, size_t field_size)
{
    uint64_t n = dec_uv(d);

    if (d->bad || n > field_size - 1 || n > d->len - d->off) {
        d->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, d->p + d->off, (size_t)n);
    out[n] = '\0';
    d->off += (size_t)n;
}

static void
dec_skip_str(struct dec *d)
{
    uint64_t n = dec_uv(d);

    if (d->bad || n > d->len - d->off) {
        d->bad = true;
        return;
    }
    d->off += (size_t)n;
}

static double
dec_f64(struct dec *d)
{
    uint64_t bits = 0;
    double v;

    for (int i = 0; i < 8; i++)
        bits |= (uint64_t)dec_byte(d) << (8 * i);
    memcpy(&v, &bits, sizeof v);
    return v;
}

bool
store_row_decode(const unsigned char *buf, size_t len, struct gw_row *row)
{
    struct dec d = {.p = buf, .len = len};
    unsigned version;

    memset(row, 0, sizeof *row);
    version = dec_byte(&d);
    if (d.bad || version < 1)
        return false;
    /* version > STORE_ROW_ENC_VERSION: a newer writer only appended fields; read ours. */
    dec_str(&d, row->id, sizeof row->id);
    row->ts_ms = dec_uv(&d);
    dec_str(&d, row->client, sizeof row->client);
    dec_str(&d, row->model, sizeof row->model);
    dec_str(&d, row->upstream, sizeof row->upstream);
    row->status = (uint16_t)dec_uv_max(&d, UINT16_MAX);
    row->code = (uint16_t)dec_uv_max(&d, UINT16_MAX);
    row->outcome = dec_byte(&d);
    row->stream = dec_byte(&d);
    row->usage.input_tokens = dec_uv(&d);
    row->usage.output_tokens = dec_uv(&d);
    row->usage.cache_read_tokens = dec_uv(&d);
    row->usage.cache_write_tokens = dec_uv(&d);
    row->usage.estimated = dec_byte(&d) != 0;
    row->cost_micros = dec_sv(&d, INT64_MIN, INT64_MAX);
    row->ttfb_ms = (int32_t)dec_sv(&d, INT32_MIN, INT32_MAX);
    row->duration_ms = (uint32_t)dec_uv_max(&d, UINT32_MAX);
    row->queued_ms = (uint32_t)dec_uv_max(&d, UINT32_MAX);
    row->tokens_per_sec = dec_f64(&d);
    row->n_attempts = (uint16_t)dec_uv_max(&d, GW_ROW_MAX_ATTEMPTS);
    for (unsigned i = 0; i < row->n_attempts && !d.bad; i++) {
        struct gw_attempt *a = &row->attempts[i];

        dec_str(&d, a->upstream, sizeof a->upstream);
        dec_str(&d, a->model, sizeof a->model);
        a->outcome = dec_byte(&d);
        a->status = (uint16_t)dec_uv_max(&d, UINT16_MAX);
        a->code = (uint16_t)dec_uv_max(&d, UINT16_MAX);
        a->queued_ms = (uint32_t)dec_uv_max(&d, UINT32_MAX);
        a->ttfb_ms = (int32_t)dec_sv(&d, INT32_MIN, INT32_MAX);
    }
    if (version >= 2)
        dec_str(&d, row->dropped, sizeof row->dropped);
    if (version >= 3)
        row->usage.reasoning_tokens = dec_uv(&d);
    if (version >= 4)
        for (unsigned i = 0; i < row->n_attempts && !d.bad; i++)
            dec_str(&d, row->attempts[i].cred, sizeof row->attempts[i].cred);
    /* Fields of later versions would be read here, guarded by version >= N. */
    if (d.bad) {
        memset(row, 0, sizeof *row);
        return false;
    }
    return true;
}

bool
store_row_decode_client(const unsigned char *buf, size_t len, char *client)
{
    struct dec d = {.p = buf, .len = len};

    client[0] = '\0';
    if (dec_byte(&d) < 1 || d.bad)
        return false;
    dec_skip_str(&d); /* id */
    (void)dec_uv(&d); /* ts_ms */
    dec_str(&d, client, GW_NAME_MAX + 1);
    return !d.bad;
}

/* ---- responses ---- */

size_t
store_resp_head_encode(unsigned char *buf, uint64_t ts_ms, const char *provider, size_t plen,
                       const char *client, size_t clen, int shape, unsigned flags)
{
    size_t at = STORE_RESP_HEAD_FIXED + plen;

    buf[0] = STORE_RESP_ENC_VERSION;
    buf[1] = (unsigned char)(at + 1 + clen);
    buf[2] = (unsigned char)shape;
    buf[3] = (unsigned char)flags;
    store_be64_put(buf + 4, ts_ms);
    buf[12] = (unsigned char)plen;
    memcpy(buf + STORE_RESP_HEAD_FIXED, provider, plen);
    buf[at] = (unsigned char)clen;
    memcpy(buf + at + 1, client, clen);
    return at + 1 + clen;
}

bool
store_resp_head_decode(const unsigned char *val, size_t len, uint64_t *ts_ms, char *provider,
                       char *client, int *shape, unsigned *flags, size_t *items_off)
{
    size_t head, plen, clen = 0;

    if (len < STORE_RESP_HEAD_FIXED || val[0] < 1)
        return false;
    head = val[1];
    plen = val[12];
    if (plen > GW_NAME_MAX || head < STORE_RESP_HEAD_FIXED + plen || head > len)
        return false;
    if (val[0] >= 2) {
        if (head < STORE_RESP_HEAD_FIXED + plen + 1)
            return false;
        clen = val[STORE_RESP_HEAD_FIXED + plen];
        if (clen > GW_NAME_MAX || head < STORE_RESP_HEAD_FIXED + plen + 1 + clen)
            return false;
    }
    if (client) {
        if (clen)
            memcpy(client, val + STORE_RESP_HEAD_FIXED + plen + 1, clen);
        client[clen] = '\0';
    }
    if (ts_ms)
        *ts_ms = store_be64_get(val + 4);
    if (shape)
        *shape = val[2];
    if (flags)
        *flags = val[3];
    if (provider) {
        memcpy(provider, val + STORE_RESP_HEAD_FIXED, plen);
        provider[plen] = '\0';
    }
    if (items_off)
        *items_off = head;
    return true;
}

size_t
store_resp_ts_key(unsigned char *key, uint64_t ts_ms, const char *id, size_t id_len)
{
    store_be64_put(key, ts_ms);
    memcpy(key + 8, id, id_len);
    return 8 + id_len;
}

/* ---- keys ---- */

size_t
store_client_key(unsigned char *key, const char *client, const unsigned char *rowkey)
{
    size_t n = strnlen(client, GW_NAME_MAX);

    memcpy(key, client, n);
    key[n] = '\0';
    memcpy(key + n + 1, rowkey, STORE_ROW_KEY_LEN);
    return n + 1 + STORE_ROW_KEY_LEN;
}
