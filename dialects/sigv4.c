/* SPDX-License-Identifier: MIT
 * dialects/sigv4.c - AWS Signature Version 4: the canonical request, the string to sign
 * and the Authorization header value of one request, as AWS's SigV4 test suite and the
 * SDKs (aws-sdk-js-v3 signature-v4, for every service but S3) compute them.
 * Pure: libcrypto's SHA-256 only (STYLE.md 2; HMAC over it here); the date is an
 * argument. The
 * only memory used is the caller's <out>: each step writes its intermediate text (the
 * canonical request, the string to sign, the query pairs to sort) at the end of <out>,
 * hashes or sorts it there, and cuts <out> back, so a signature costs no allocation
 * beyond the growth of the buffer the caller reuses.
 * Owns:    nothing beyond one call.
 * Threads: any; no state but the SHA-256 digest dl_sigv4_init fetches (main, at start).
 * See:     dialects/sigv4.h, tests/unit/dialects/test_sigv4.c
 */
#include "dialects/sigv4.h"

#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

/* More headers or query parameters than this in one signature is a caller's mistake
 * (gw signs five headers and no query): refused rather than sorted on the heap. */
#define SIGV4_MAX_HDRS 32
#define SIGV4_MAX_PARAMS 64

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"

/* ---- SHA-256 and HMAC ----
 * OpenSSL 3's one-shot SHA256() and HMAC() look the algorithm up by name through the
 * provider machinery on every call (locks, allocations): 106k of the 131k instructions
 * a signature took (docs/perf.md). The digest is fetched once (dl_sigv4_init, before any
 * thread signs) and every hash goes through it; HMAC is RFC 2104 over it (two hashes
 * with the padded key). Without the init, EVP_sha256() (looked up on each use). */

static EVP_MD *sha256_fetched; /* never freed: one per process, reachable to the end */

void
dl_sigv4_init(void)
{
    if (!sha256_fetched)
        sha256_fetched = EVP_MD_fetch(NULL, "SHA2-256", NULL);
}

/* <md> = SHA-256 of <a> then <b> (bn may be 0). */
static void
sha256_two(const void *a, size_t an, const void *b, size_t bn,
           unsigned char md[SHA256_DIGEST_LENGTH])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    if (!ctx || !EVP_DigestInit_ex2(ctx, sha256_fetched ? sha256_fetched : EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(ctx, a, an) || (bn && !EVP_DigestUpdate(ctx, b, bn)) ||
        !EVP_DigestFinal_ex(ctx, md, NULL))
        memset(md, 0, SHA256_DIGEST_LENGTH); /* out of memory: a signature AWS refuses */
    EVP_MD_CTX_free(ctx);
}

/* <md> = HMAC-SHA256(<key>, <msg>); <md> may be <key>. */
static void
hmac(const unsigned char *key, size_t klen, const void *msg, size_t n,
     unsigned char md[SHA256_DIGEST_LENGTH])
{
    enum { BLOCK = 64 };
    unsigned char kb[BLOCK] = {0}, pad[BLOCK], inner[SHA256_DIGEST_LENGTH];

    if (klen > BLOCK)
        sha256_two(key, klen, NULL, 0, kb);
    else
        memcpy(kb, key, klen);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = kb[i] ^ 0x36;
    sha256_two(pad, BLOCK, msg, n, inner);
    for (int i = 0; i < BLOCK; i++)
        pad[i] = kb[i] ^ 0x5c;
    sha256_two(pad, BLOCK, inner, sizeof inner, md);
    explicit_bzero(kb, sizeof kb);
    explicit_bzero(pad, sizeof pad);
}

/* ---- small text helpers ---- */

/* Cuts <out> back to <len> bytes: scratch text written past a step's start. */
static void
cut(struct gw_buf *out, size_t len)
{
    out->len = len;
    if (out->data)
        out->data[len] = '\0';
}

/* RFC 3986 unreserved characters: the only bytes SigV4 leaves unencoded. */
static bool
is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static enum gw_code
append_encoded(struct gw_buf *out, const char *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    enum gw_code rc = GW_OK;
    size_t i;

    for (i = 0; i < n && rc == GW_OK; i++) {
        unsigned char c = (unsigned char)p[i];
        char e[3] = {'%', hex[c >> 4], hex[c & 15]};

        rc = is_unreserved(c) ? gw_buf_append(out, &p[i], 1) : gw_buf_append(out, e, 3);
    }
    return rc;
}

/* Appends <s> percent-decoded then encoded as SigV4 wants: a query as sent is already
 * encoded by its writer's rules ("%E1%88%B4", or the bare UTF-8), and AWS signs the
 * parameter itself, so both spellings sign the same (the suite's
 * get-vanilla-query-order-encoded and get-vanilla-utf8-query). A '%' not followed by two
 * hex digits is a literal '%'; '+' stays '+' (encoded %2B), as the JS SDK's parser
 * keeps it. */
static enum gw_code
append_query_part(struct gw_buf *out, struct gw_str s)
{
    enum gw_code rc = GW_OK;
    size_t i;

    for (i = 0; i < s.len && rc == GW_OK; i++) {
        char c = s.ptr[i];
        int hi = c == '%' && i + 2 < s.len ? gw_hex_digit(s.ptr[i + 1]) : -1;
        int lo = hi >= 0 ? gw_hex_digit(s.ptr[i + 2]) : -1;

        if (lo >= 0) {
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        rc = append_encoded(out, &c, 1);
    }
    return rc;
}

/* ---- date ---- */

void
dl_sigv4_amz_date(int64_t unix_s, char out[DL_SIGV4_DATE_LEN + 1])
{
    /* Clamped to years 1970..9999, the only ones the 16-character form can write. */
    time_t t = (time_t)(unix_s < 0 ? 0 : unix_s > 253402300799LL ? 253402300799LL : unix_s);
    struct tm tm;

    gmtime_r(&t, &tm);
    gw_put_digits(out, (unsigned)tm.tm_year + 1900, 4);
    gw_put_digits(out + 4, (unsigned)tm.tm_mon + 1, 2);
    gw_put_digits(out + 6, (unsigned)tm.tm_mday, 2);
    out[8] = 'T';
    gw_put_digits(out + 9, (unsigned)tm.tm_hour, 2);
    gw_put_digits(out + 11, (unsigned)tm.tm_min, 2);
    gw_put_digits(out + 13, (unsigned)tm.tm_sec, 2);
    out[15] = 'Z';
    out[16] = '\0';
}

void
dl_sigv4_payload_hash(const void *body, size_t len, char out[DL_SIGV4_HASH_HEX])
{
    unsigned char d[SHA256_DIGEST_LENGTH];

    sha256_two(body, len, NULL, 0, d);
    gw_hex_encode(d, sizeof d, out);
}

/* ---- canonical URI ---- */

/* Pops the last segment written since <start>: back to the '/' that opened it (or to
 * <start> for a first segment written without one). */
static void
path_pop(struct gw_buf *out, size_t start)
{
    size_t i = out->len;

    while (i > start && out->data[i - 1] != '/')
        i--;
    cut(out, i > start ? i - 1 : start);
}

/* The path normalized as RFC 3986 5.2.4 removes dot segments, with empty segments
 * dropped (so "//" is "/"), a leading and a trailing '/' kept, then every segment
 * URI-encoded: on the wire path that is the second encoding AWS expects ("%3A" signs as
 * "%253A"). */
static enum gw_code
append_canonical_uri(struct gw_buf *out, struct gw_str path)
{
    bool lead = path.len > 0 && path.ptr[0] == '/';
    bool trail = path.len > 0 && path.ptr[path.len - 1] == '/';
    size_t start = out->len, n = 0, i = 0;
    enum gw_code rc = GW_OK;

    while (i < path.len && rc == GW_OK) {
        size_t j = i;
        struct gw_str seg;

        while (j < path.len && path.ptr[j] != '/')
            j++;
        seg = (struct gw_str){path.ptr + i, j - i};
        i = j + 1;
        if (seg.len == 0 || gw_str_eq(seg, GW_STR_LIT(".")))
            continue;
        if (gw_str_eq(seg, GW_STR_LIT(".."))) {
            if (n > 0) {
                path_pop(out, start);
                n--;
            }
            continue;
        }
        if (lead || n > 0)
            rc = gw_buf_append(out, "/", 1);
        if (rc == GW_OK)
            rc = append_encoded(out, seg.ptr, seg.len);
        n++;
    }
    if (rc == GW_OK && ((n == 0 && lead) || (n > 0 && trail) || out->len == start))
        rc = gw_buf_append(out, "/", 1); /* an empty path is "/" too */
    return rc;
}

/* ---- canonical query ---- */

struct sigv4_param {
    size_t off, name_len, len; /* the encoded "name=value" at out->data + off */
};

static int
param_cmp(const char *base, const struct sigv4_param *a, const struct sigv4_param *b)
{
    size_t na = a->name_len, nb = b->name_len, va = a->len - na - 1, vb = b->len - nb - 1;
    int c = memcmp(base + a->off, base + b->off, na < nb ? na : nb);

    if (c || na != nb)
        return c ? c : (na < nb ? -1 : 1);
    c = memcmp(base + a->off + na + 1, base + b->off + nb + 1, va < vb ? va : vb);
    return c ? c : (va < vb ? -1 : va > vb ? 1 : 0);
}

/* Writes each parameter of <query> encoded at the end of <out>, recording where. */
static enum gw_code
query_collect(struct gw_buf *out, struct gw_str query, struct sigv4_param *ps, size_t *np)
{
    size_t i = 0, n = 0;
    enum gw_code rc = GW_OK;

    while (i < query.len && rc == GW_OK) {
        size_t j = i, eq;
        struct sigv4_param p = {.off = out->len};

        while (j < query.len && query.ptr[j] != '&')
            j++;
        for (eq = i; eq < j && query.ptr[eq] != '='; eq++)
            ;
        if (j > i) {
            if (n == SIGV4_MAX_PARAMS)
                return GW_E_BAD_REQUEST;
            rc = append_query_part(out, (struct gw_str){query.ptr + i, eq - i});
            p.name_len = out->len - p.off;
            if (rc == GW_OK)
                rc = gw_buf_append(out, "=", 1);
            if (rc == GW_OK && eq < j)
                rc = append_query_part(out, (struct gw_str){query.ptr + eq + 1, j - eq - 1});
            p.len = out->len - p.off;
            ps[n++] = p;
        }
        i = j + 1;
    }
    *np = n;
    return rc;
}

/* The parameters sorted by encoded name, then encoded value (byte order), joined by
 * '&'. Written first unsorted after <out>'s end, then in order after them, then moved
 * down over the unsorted copy. */
static enum gw_code
append_canonical_query(struct gw_buf *out, struct gw_str query)
{
    struct sigv4_param ps[SIGV4_MAX_PARAMS];
    size_t start = out->len, n = 0, i, k, sorted;
    enum gw_code rc = query_collect(out, query, ps, &n);

    for (i = 1; i < n && rc == GW_OK; i++) /* insertion sort: n is small */
        for (k = i; k > 0 && param_cmp(out->data, &ps[k - 1], &ps[k]) > 0; k--) {
            struct sigv4_param t = ps[k];

            ps[k] = ps[k - 1];
            ps[k - 1] = t;
        }
    sorted = out->len;
    for (i = 0; i < n && rc == GW_OK; i++) {
        if (i > 0)
            rc = gw_buf_append(out, "&", 1);
        if (rc == GW_OK)
            rc = gw_buf_reserve(out, ps[i].len); /* so out->data stays put below */
        if (rc == GW_OK)
            rc = gw_buf_append(out, out->data + ps[i].off, ps[i].len);
    }
    if (rc != GW_OK)
        return rc;
    if (out->len > sorted)
        memmove(out->data + start, out->data + sorted, out->len - sorted);
    cut(out, start + (out->len - sorted));
    return GW_OK;
}

/* ---- canonical headers ---- */

static int
name_cmp(struct gw_str a, struct gw_str b)
{
    size_t i, n = a.len < b.len ? a.len : b.len;

    for (i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a.ptr[i], y = (unsigned char)b.ptr[i];

        x = (x >= 'A' && x <= 'Z') ? (unsigned char)(x + 32) : x;
        y = (y >= 'A' && y <= 'Z') ? (unsigned char)(y + 32) : y;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return a.len < b.len ? -1 : a.len > b.len ? 1 : 0;
}

/* <order> = the indexes of the headers sorted by lower-case name; stable, so repeated
 * names keep the order they were given in (their values join in that order). */
static enum gw_code
sort_headers(const struct dl_sigv4_input *in, size_t *order)
{
    size_t i, k;

    if (in->n_hdrs > SIGV4_MAX_HDRS)
        return GW_E_BAD_REQUEST;
    for (i = 0; i < in->n_hdrs; i++) {
        for (k = i; k > 0 && name_cmp(in->hdrs[order[k - 1]].name, in->hdrs[i].name) > 0; k--)
            order[k] = order[k - 1];
        order[k] = i;
    }
    return GW_OK;
}

/* The value with leading and trailing blanks cut and each inner run of blanks (folded
 * lines included: the suite's get-header-value-multiline) written as one space. */
static enum gw_code
append_trimmed(struct gw_buf *out, struct gw_str v)
{
    size_t i = 0, j = v.len;
    enum gw_code rc = GW_OK;

    while (i < j && gw_is_blank(v.ptr[i]))
        i++;
    while (j > i && gw_is_blank(v.ptr[j - 1]))
        j--;
    while (i < j && rc == GW_OK) {
        size_t k = i;

        while (k < j && !gw_is_blank(v.ptr[k]))
            k++;
        rc = gw_buf_append(out, v.ptr + i, k - i);
        if (k < j && rc == GW_OK)
            rc = gw_buf_append(out, " ", 1);
        for (i = k; i < j && gw_is_blank(v.ptr[i]); i++)
            ;
    }
    return rc;
}

static enum gw_code
append_lower(struct gw_buf *out, struct gw_str s)
{
    enum gw_code rc = GW_OK;
    size_t i;

    for (i = 0; i < s.len && rc == GW_OK; i++) {
        char c = s.ptr[i];

        c = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        rc = gw_buf_append(out, &c, 1);
    }
    return rc;
}

/* "name:value[,value...]\n" per distinct name, in <order>. */
static enum gw_code
append_canonical_headers(struct gw_buf *out, const struct dl_sigv4_input *in, const size_t *order)
{
    enum gw_code rc = GW_OK;
    size_t i;

    for (i = 0; i < in->n_hdrs && rc == GW_OK; i++) {
        const struct dl_sigv4_hdr *h = &in->hdrs[order[i]];
        bool same = i > 0 && name_cmp(in->hdrs[order[i - 1]].name, h->name) == 0;

        if (same) {
            out->len--; /* the previous value's '\n' becomes the ',' joining this one */
            rc = gw_buf_append(out, ",", 1);
        } else {
            rc = append_lower(out, h->name);
            if (rc == GW_OK)
                rc = gw_buf_append(out, ":", 1);
        }
        if (rc == GW_OK)
            rc = append_trimmed(out, h->value);
        if (rc == GW_OK)
            rc = gw_buf_append(out, "\n", 1);
    }
    return rc;
}

/* "name;name;..." of the distinct names in <order>. */
static enum gw_code
append_signed_headers(struct gw_buf *out, const struct dl_sigv4_input *in, const size_t *order)
{
    enum gw_code rc = GW_OK;
    size_t i;

    for (i = 0; i < in->n_hdrs && rc == GW_OK; i++) {
        struct gw_str name = in->hdrs[order[i]].name;

        if (i > 0 && name_cmp(in->hdrs[order[i - 1]].name, name) == 0)
            continue;
        if (i > 0)
            rc = gw_buf_append(out, ";", 1);
        if (rc == GW_OK)
            rc = append_lower(out, name);
    }
    return rc;
}

/* ---- the three texts ---- */

static enum gw_code
check_input(const struct dl_sigv4_input *in)
{
    size_t i;

    if (in->amz_date.len != DL_SIGV4_DATE_LEN)
        return GW_E_BAD_REQUEST;
    for (i = 0; i < in->n_hdrs; i++)
        if (gw_str_eq_nocase(in->hdrs[i].name, GW_STR_LIT("host")))
            return GW_OK;
    return GW_E_BAD_REQUEST; /* AWS signs the host: a request without one cannot verify */
}

/* Appends every piece joined by the '\n's of the canonical request; on an error <out> is
 * cut back to where it was. */
enum gw_code
dl_sigv4_canonical_request(const struct dl_sigv4_input *in, struct gw_buf *out)
{
    size_t order[SIGV4_MAX_HDRS], start = out->len;
    enum gw_code rc = check_input(in);

    if (rc == GW_OK)
        rc = sort_headers(in, order);
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->method);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = append_canonical_uri(out, in->path);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = append_canonical_query(out, in->query);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = append_canonical_headers(out, in, order);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = append_signed_headers(out, in, order);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->payload_hash);
    if (rc != GW_OK)
        cut(out, start);
    return rc;
}

/* "<yyyymmdd>/<region>/<service>/aws4_request" */
static enum gw_code
append_scope(struct gw_buf *out, const struct dl_sigv4_input *in)
{
    enum gw_code rc = gw_buf_append(out, in->amz_date.ptr, 8);

    if (rc == GW_OK)
        rc = gw_buf_append(out, "/", 1);
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->region);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "/", 1);
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->service);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "/aws4_request");
    return rc;
}

enum gw_code
dl_sigv4_string_to_sign(const struct dl_sigv4_input *in, struct gw_buf *out)
{
    size_t start = out->len;
    unsigned char d[SHA256_DIGEST_LENGTH];
    char hex[DL_SIGV4_HASH_HEX];
    enum gw_code rc = dl_sigv4_canonical_request(in, out);

    if (rc != GW_OK) {
        cut(out, start);
        return rc;
    }
    sha256_two(out->data + start, out->len - start, NULL, 0, d);
    gw_hex_encode(d, sizeof d, hex);
    cut(out, start);
    rc = gw_buf_append_cstr(out, SIGV4_ALGORITHM "\n");
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->amz_date);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = append_scope(out, in);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "\n", 1);
    if (rc == GW_OK)
        rc = gw_buf_append(out, hex, DL_SIGV4_HASH_HEX - 1);
    if (rc != GW_OK)
        cut(out, start);
    return rc;
}

/* The signing key: HMAC chain over date, region, service and "aws4_request", keyed
 * first by "AWS4" + the secret. That first key is built at the end of <out> (a secret
 * has no length bound the stack should carry) and wiped there before <out> is cut. */
enum gw_code
dl_sigv4_signing_key(const struct dl_sigv4_input *in, struct gw_buf *out,
                     unsigned char k[DL_SIGV4_KEY_LEN])
{
    size_t start = out->len;
    enum gw_code rc = gw_buf_append_cstr(out, "AWS4");

    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->secret_access_key);
    if (rc == GW_OK) {
        hmac((unsigned char *)out->data + start, out->len - start, in->amz_date.ptr, 8, k);
        hmac(k, SHA256_DIGEST_LENGTH, in->region.ptr, in->region.len, k);
        hmac(k, SHA256_DIGEST_LENGTH, in->service.ptr, in->service.len, k);
        hmac(k, SHA256_DIGEST_LENGTH, "aws4_request", 12, k);
    }
    if (out->len > start)
        explicit_bzero(out->data + start, out->len - start);
    cut(out, start);
    return rc;
}

static enum gw_code
append_authorization(const struct dl_sigv4_input *in, const char *sig, struct gw_buf *out)
{
    size_t order[SIGV4_MAX_HDRS];
    enum gw_code rc = sort_headers(in, order);

    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, SIGV4_ALGORITHM " Credential=");
    if (rc == GW_OK)
        rc = gw_buf_append_str(out, in->access_key_id);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "/", 1);
    if (rc == GW_OK)
        rc = append_scope(out, in);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ", SignedHeaders=");
    if (rc == GW_OK)
        rc = append_signed_headers(out, in, order);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ", Signature=");
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, sig);
    return rc;
}

static bool
name_is(const char *kept, struct gw_str s)
{
    return strlen(kept) == s.len && memcmp(kept, s.ptr, s.len) == 0;
}

const unsigned char *
dl_sigv4_cache_key(struct dl_sigv4_cache *c, const struct dl_sigv4_input *in,
                   struct gw_buf *scratch)
{
    struct gw_str sec = in->secret_access_key;
    unsigned i;

    if (sec.len == 0 || sec.len > DL_SIGV4_CACHE_SECRET_MAX ||
        in->region.len >= DL_SIGV4_CACHE_NAME_MAX || in->service.len >= DL_SIGV4_CACHE_NAME_MAX ||
        in->amz_date.len < 8)
        return NULL;
    for (i = 0; i < DL_SIGV4_CACHE_N; i++) {
        if (c->e[i].secret_len == sec.len && memcmp(c->e[i].secret, sec.ptr, sec.len) == 0 &&
            memcmp(c->e[i].day, in->amz_date.ptr, 8) == 0 && name_is(c->e[i].region, in->region) &&
            name_is(c->e[i].service, in->service))
            return c->e[i].key;
    }
    i = c->next;
    c->next = (c->next + 1) % DL_SIGV4_CACHE_N;
    explicit_bzero(&c->e[i], sizeof(c->e[i]));
    if (dl_sigv4_signing_key(in, scratch, c->e[i].key) != GW_OK) {
        explicit_bzero(&c->e[i], sizeof(c->e[i]));
        return NULL;
    }
    memcpy(c->e[i].secret, sec.ptr, sec.len);
    c->e[i].secret_len = sec.len;
    memcpy(c->e[i].region, in->region.ptr, in->region.len);
    memcpy(c->e[i].service, in->service.ptr, in->service.len);
    memcpy(c->e[i].day, in->amz_date.ptr, 8);
    return c->e[i].key;
}

void
dl_sigv4_cache_wipe(struct dl_sigv4_cache *c)
{
    explicit_bzero(c, sizeof(*c));
}

enum gw_code
dl_sigv4_authorization(const struct dl_sigv4_input *in, struct gw_buf *out)
{
    size_t start = out->len;
    unsigned char k[SHA256_DIGEST_LENGTH], sig[SHA256_DIGEST_LENGTH];
    char hex[DL_SIGV4_HASH_HEX];
    enum gw_code rc = dl_sigv4_string_to_sign(in, out);

    if (rc == GW_OK && in->signing_key)
        memcpy(k, in->signing_key, sizeof k);
    else if (rc == GW_OK)
        rc = dl_sigv4_signing_key(in, out, k);
    if (rc == GW_OK) {
        hmac(k, sizeof k, out->data + start, out->len - start, sig);
        gw_hex_encode(sig, sizeof sig, hex);
    }
    explicit_bzero(k, sizeof k);
    cut(out, start);
    if (rc == GW_OK)
        rc = append_authorization(in, hex, out);
    if (rc != GW_OK)
        cut(out, start);
    return rc;
}
