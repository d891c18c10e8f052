/* SPDX-License-Identifier: MIT
 * bench/sigv4.c - the SigV4 check of `gwbench upstream`'s Bedrock route: parses the
 * Authorization header, recomputes the canonical request (method, the path normalized
 * and URI-encoded once more as AWS does for every service but S3, the sorted query, the
 * SignedHeaders' trimmed values, the SHA-256 of the body as received), the string to
 * sign and the HMAC chain of the derived key, and compares the signatures.
 * Owns:    nothing.
 * Threads: any; no state.
 * See:     bench/sigv4.h, docs/gwbench.md
 */
#include "bench/sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#define ALG "AWS4-HMAC-SHA256"
#define BAD_SIG                                                                                    \
    "The request signature we calculated does not match the signature you provided. Check your "   \
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
#define BAD_TOKEN "The security token included in the request is invalid."

static bool
refuse(struct bench_sigv4_refusal *out, const char *type, const char *msg, const char *why)
{
    out->type = type;
    snprintf(out->message, sizeof(out->message), "%s", msg);
    snprintf(out->why, sizeof(out->why), "%s", why);
    return false;
}

/* ---- headers ---- */

/* The value of the first header <name> (lower case), or false when absent. */
static bool
header(const struct bench_sigv4_req *r, const char *name, struct gw_str *v)
{
    const char *p = r->hdrs, *e = r->hdrs + r->hdrs_len;

    while (p < e) {
        const char *val = p + strlen(p) + 1;

        if (strcmp(p, name) == 0) {
            *v = (struct gw_str){val, strlen(val)};
            return true;
        }
        p = val + strlen(val) + 1;
    }
    return false;
}

/* Appends <v> trimmed, inner runs of blanks made one space. */
static void
append_trimmed(struct gw_buf *b, struct gw_str v)
{
    size_t i = 0, n = v.len;
    bool blank = false;

    while (i < n && (v.ptr[i] == ' ' || v.ptr[i] == '\t'))
        i++;
    while (n > i && (v.ptr[n - 1] == ' ' || v.ptr[n - 1] == '\t'))
        n--;
    for (; i < n; i++) {
        if (v.ptr[i] == ' ' || v.ptr[i] == '\t') {
            blank = true;
            continue;
        }
        if (blank)
            (void)gw_buf_append(b, " ", 1);
        blank = false;
        (void)gw_buf_append(b, v.ptr + i, 1);
    }
}

/* Appends "name:v1,v2\n": every value of header <name>/<nlen> in arrival order. */
static void
append_canonical_header(struct gw_buf *b, const struct bench_sigv4_req *r, const char *name,
                        size_t nlen)
{
    const char *p = r->hdrs, *e = r->hdrs + r->hdrs_len;
    bool first = true;

    (void)gw_buf_append(b, name, nlen);
    (void)gw_buf_append(b, ":", 1);
    while (p < e) {
        const char *val = p + strlen(p) + 1;

        if (strlen(p) == nlen && strncasecmp(p, name, nlen) == 0) {
            if (!first)
                (void)gw_buf_append(b, ",", 1);
            append_trimmed(b, gw_str_c(val));
            first = false;
        }
        p = val + strlen(val) + 1;
    }
    (void)gw_buf_append(b, "\n", 1);
}

/* ---- URI encoding ---- */

static bool
unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

/* Appends <s>/<n> with every byte but the unreserved ones (and '/' when <keep_slash>)
 * as %XX, upper-case hex. */
static void
append_uri_encoded(struct gw_buf *b, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (unreserved(ch) || (keep_slash && ch == '/')) {
            (void)gw_buf_append(b, s + i, 1);
        } else {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};

            (void)gw_buf_append(b, e, 3);
        }
    }
}

/* The canonical URI: the path's segments with "" and "." dropped and ".." taking the one
 * before, joined by '/', the leading and trailing '/' kept, then URI-encoded as a whole
 * ('/' kept): a "%3A" on the wire is "%253A" here. */
static void
append_canonical_uri(struct gw_buf *b, struct gw_str path)
{
    struct gw_buf norm = {0};
    size_t seg_start[256], nseg = 0, i = 0;

    (void)gw_buf_append(&norm, "/", 1);
    while (i < path.len) {
        size_t j = i;

        while (j < path.len && path.ptr[j] != '/')
            j++;
        if (j - i == 2 && memcmp(path.ptr + i, "..", 2) == 0) {
            if (nseg > 0)
                norm.len = seg_start[--nseg];
        } else if (j > i && !(j - i == 1 && path.ptr[i] == '.')) {
            if (nseg < sizeof(seg_start) / sizeof(seg_start[0]))
                seg_start[nseg++] = norm.len;
            if (norm.len > 1)
                (void)gw_buf_append(&norm, "/", 1);
            (void)gw_buf_append(&norm, path.ptr + i, j - i);
        }
        i = j + 1;
    }
    if (nseg > 0 && path.len > 0 && path.ptr[path.len - 1] == '/')
        (void)gw_buf_append(&norm, "/", 1);
    append_uri_encoded(b, norm.data, norm.len, true);
    gw_buf_fini(&norm);
}

struct qparam {
    struct gw_buf k, v; /* encoded */
};

static int
qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->k.data ? x->k.data : "", y->k.data ? y->k.data : "");

    return c ? c : strcmp(x->v.data ? x->v.data : "", y->v.data ? y->v.data : "");
}

/* Appends the percent-decoded <s>/<n> encoded again the canonical way. */
static void
append_requoted(struct gw_buf *b, const char *s, size_t n)
{
    char *tmp = malloc(n + 1);
    int dn = tmp ? gw_pct_decode((struct gw_str){s, n}, tmp, n + 1) : -1;

    if (dn >= 0)
        append_uri_encoded(b, tmp, (size_t)dn, false);
    else
        append_uri_encoded(b, s, n, false);
    free(tmp);
}

/* The canonical query: each name=value decoded and encoded again, sorted by name then
 * value, joined by '&'. */
static void
append_canonical_query(struct gw_buf *b, struct gw_str q)
{
    struct qparam ps[64];
    size_t np = 0, i = 0;

    while (i < q.len && np < sizeof(ps) / sizeof(ps[0])) {
        size_t j = i, eq;

        while (j < q.len && q.ptr[j] != '&')
            j++;
        if (j > i) {
            for (eq = i; eq < j && q.ptr[eq] != '='; eq++)
                ;
            ps[np] = (struct qparam){{0}, {0}};
            append_requoted(&ps[np].k, q.ptr + i, eq - i);
            (void)gw_buf_reserve(&ps[np].k, 1);
            (void)gw_buf_reserve(&ps[np].v, 1);
            if (eq < j)
                append_requoted(&ps[np].v, q.ptr + eq + 1, j - eq - 1);
            np++;
        }
        i = j + 1;
    }
    qsort(ps, np, sizeof(ps[0]), qparam_cmp);
    for (i = 0; i < np; i++) {
        if (i)
            (void)gw_buf_append(b, "&", 1);
        (void)gw_buf_append(b, ps[i].k.data, ps[i].k.len);
        (void)gw_buf_append(b, "=", 1);
        (void)gw_buf_append(b, ps[i].v.data, ps[i].v.len);
        gw_buf_fini(&ps[i].k);
        gw_buf_fini(&ps[i].v);
    }
}

/* ---- the Authorization header ---- */

struct authz {
    struct gw_str credential, signed_headers, signature;
    struct gw_str key_id, date, region, service, terminator; /* the Credential's parts */
};

/* The value of parameter <name> in the comma-separated list <p>/<n>, blanks allowed
 * around items. */
static bool
authz_param(const char *p, size_t n, const char *name, struct gw_str *v)
{
    size_t i = 0, k = strlen(name);

    while (i < n) {
        size_t j;

        while (i < n && (p[i] == ' ' || p[i] == ','))
            i++;
        for (j = i; j < n && p[j] != ','; j++)
            ;
        if (j - i > k && memcmp(p + i, name, k) == 0 && p[i + k] == '=') {
            size_t e = j;

            while (e > i + k + 1 && p[e - 1] == ' ')
                e--;
            *v = (struct gw_str){p + i + k + 1, e - i - k - 1};
            return true;
        }
        i = j;
    }
    return false;
}

/* Splits the Credential "ID/DATE/REGION/SERVICE/aws4_request"; false when it does not
 * have five parts. */
static bool
split_credential(struct authz *a)
{
    struct gw_str *parts[5] = {&a->key_id, &a->date, &a->region, &a->service, &a->terminator};
    const char *p = a->credential.ptr, *e = p + a->credential.len;

    for (int i = 0; i < 5; i++) {
        const char *s = memchr(p, '/', (size_t)(e - p));

        if (i == 4) {
            if (s != NULL)
                return false;
            s = e;
        } else if (s == NULL) {
            return false;
        }
        *parts[i] = (struct gw_str){p, (size_t)(s - p)};
        p = s + 1;
    }
    return true;
}

/* ---- time ---- */

/* Parses "YYYYMMDDTHHMMSSZ" into unix seconds. */
static bool
parse_amz_date(struct gw_str d, int64_t *out)
{
    struct tm tm = {0};
    int v[6], len[6] = {4, 2, 2, 2, 2, 2}, off[6] = {0, 4, 6, 9, 11, 13};

    if (d.len != 16 || d.ptr[8] != 'T' || d.ptr[15] != 'Z')
        return false;
    for (int i = 0; i < 6; i++) {
        v[i] = 0;
        for (int j = 0; j < len[i]; j++) {
            char ch = d.ptr[off[i] + j];

            if (ch < '0' || ch > '9')
                return false;
            v[i] = v[i] * 10 + (ch - '0');
        }
    }
    tm.tm_year = v[0] - 1900;
    tm.tm_mon = v[1] - 1;
    tm.tm_mday = v[2];
    tm.tm_hour = v[3];
    tm.tm_min = v[4];
    tm.tm_sec = v[5];
    if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60)
        return false;
    *out = (int64_t)timegm(&tm);
    return true;
}

static void
fmt_amz_date(int64_t t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* Refuses a date more than BENCH_SIGV4_SKEW_S away from the clock, with AWS's words. */
static bool
date_in_window(const struct bench_sigv4_req *r, struct gw_str d, int64_t t,
               struct bench_sigv4_refusal *out)
{
    char now[17], edge[17], msg[160];

    fmt_amz_date(r->now, now);
    if (t < r->now - BENCH_SIGV4_SKEW_S) {
        fmt_amz_date(r->now - BENCH_SIGV4_SKEW_S, edge);
        snprintf(msg, sizeof(msg), "Signature expired: %.*s is now earlier than %s (%s - 15 min.)",
                 (int)d.len, d.ptr, edge, now);
        return refuse(out, "InvalidSignatureException", msg, "x-amz-date too old");
    }
    if (t > r->now + BENCH_SIGV4_SKEW_S) {
        fmt_amz_date(r->now + BENCH_SIGV4_SKEW_S, edge);
        snprintf(msg, sizeof(msg),
                 "Signature not yet current: %.*s is still later than %s (%s + 15 min.)",
                 (int)d.len, d.ptr, edge, now);
        return refuse(out, "InvalidSignatureException", msg, "x-amz-date in the future");
    }
    return true;
}

/* ---- digests ---- */

static void
sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char d[SHA256_DIGEST_LENGTH];

    SHA256(p, n, d);
    gw_hex_encode(d, sizeof(d), out);
}

static void
hmac(const void *key, size_t klen, const void *msg, size_t n, unsigned char out[32])
{
    unsigned int olen = 32;

    HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &olen);
}

/* The hex signature of <sts> under <k>'s key derived for <a>'s scope. */
static void
signature(const struct bench_sigv4_creds *k, const struct authz *a, const struct gw_buf *sts,
          char out[65])
{
    unsigned char kd[32], kr[32], ks[32], kk[32], sig[32];
    struct gw_buf secret = {0};

    (void)gw_buf_printf(&secret, "AWS4%s", k->secret);
    hmac(secret.data, secret.len, a->date.ptr, a->date.len, kd);
    hmac(kd, 32, a->region.ptr, a->region.len, kr);
    hmac(kr, 32, a->service.ptr, a->service.len, ks);
    hmac(ks, 32, "aws4_request", 12, kk);
    hmac(kk, 32, sts->data, sts->len, sig);
    gw_hex_encode(sig, 32, out);
    /* the secret's copy does not linger in freed memory */
    memset(secret.data, 0, secret.cap);
    gw_buf_fini(&secret);
}

/* Appends the canonical request of <r> signed with <a>'s SignedHeaders. */
static void
canonical_request(const struct bench_sigv4_req *r, const struct authz *a, const char *body_hash,
                  struct gw_buf *b)
{
    const char *p = a->signed_headers.ptr, *e = p + a->signed_headers.len;

    (void)gw_buf_append(b, r->method.ptr, r->method.len);
    (void)gw_buf_append(b, "\n", 1);
    append_canonical_uri(b, r->path);
    (void)gw_buf_append(b, "\n", 1);
    append_canonical_query(b, r->query);
    (void)gw_buf_append(b, "\n", 1);
    while (p < e) {
        const char *s = memchr(p, ';', (size_t)(e - p));

        if (s == NULL)
            s = e;
        append_canonical_header(b, r, p, (size_t)(s - p));
        p = s + 1;
    }
    (void)gw_buf_append(b, "\n", 1);
    (void)gw_buf_append(b, a->signed_headers.ptr, a->signed_headers.len);
    (void)gw_buf_append(b, "\n", 1);
    (void)gw_buf_append_cstr(b, body_hash);
}

/* Whether <list> ("a;b;c") names <name>. */
static bool
signs(struct gw_str list, const char *name)
{
    size_t k = strlen(name), i = 0;

    while (i < list.len) {
        size_t j = i;

        while (j < list.len && list.ptr[j] != ';')
            j++;
        if (j - i == k && strncasecmp(list.ptr + i, name, k) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

/* The Authorization header parsed; refuses what is not a complete SigV4 one. */
static bool
parse_authz(const struct bench_sigv4_req *r, struct authz *a, struct bench_sigv4_refusal *out)
{
    struct gw_str v;
    char msg[320];
    size_t n = 0;

    if (!header(r, "authorization", &v))
        return refuse(out, "MissingAuthenticationTokenException", "Missing Authentication Token",
                      "no Authorization header");
    if (v.len < sizeof(ALG) || memcmp(v.ptr, ALG " ", sizeof(ALG)) != 0)
        return refuse(out, "IncompleteSignatureException",
                      "Authorization header requires the 'AWS4-HMAC-SHA256' algorithm.",
                      "Authorization is not SigV4");
    v.ptr += sizeof(ALG);
    v.len -= sizeof(ALG);
    msg[0] = '\0';
#define NEED(field, pname)                                                                         \
    if (!authz_param(v.ptr, v.len, pname, &a->field))                                              \
        n += (size_t)snprintf(msg + n, sizeof(msg) - n,                                            \
                              "%sAuthorization header requires '" pname "' parameter.",            \
                              n ? " " : "");
    NEED(credential, "Credential")
    NEED(signature, "Signature")
    NEED(signed_headers, "SignedHeaders")
#undef NEED
    if (!header(r, "x-amz-date", &v))
        n += (size_t)snprintf(msg + n, sizeof(msg) - n,
                              "%sAuthorization header requires existence of either a "
                              "'X-Amz-Date' or a 'Date' header.",
                              n ? " " : "");
    if (n > 0)
        return refuse(out, "IncompleteSignatureException", msg, "Authorization incomplete");
    if (!split_credential(a))
        return refuse(out, "IncompleteSignatureException",
                      "Credential must have exactly 5 slash-delimited elements, e.g. "
                      "keyid/date/region/service/term.",
                      "Credential malformed");
    if (!signs(a->signed_headers, "host"))
        return refuse(out, "IncompleteSignatureException",
                      "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
                      "host not signed");
    return true;
}

/* The access key id and the session token. */
static bool
check_identity(const struct bench_sigv4_creds *k, const struct bench_sigv4_req *r,
               const struct authz *a, struct bench_sigv4_refusal *out)
{
    struct gw_str tok;
    bool has_tok = header(r, "x-amz-security-token", &tok);

    if (!gw_str_eq(a->key_id, gw_str_c(k->key_id)))
        return refuse(out, "UnrecognizedClientException", BAD_TOKEN, "unknown access key id");
    if (k->token == NULL ? has_tok : !has_tok || !gw_str_eq(tok, gw_str_c(k->token)))
        return refuse(out, "UnrecognizedClientException", BAD_TOKEN,
                      "x-amz-security-token does not match --aws-session-token");
    return true;
}

/* The scope's date, region, service and terminator. */
static bool
check_scope(const struct bench_sigv4_creds *k, const struct authz *a, struct gw_str amz_date,
            struct bench_sigv4_refusal *out)
{
    char msg[320];

    if (a->date.len != 8 || memcmp(a->date.ptr, amz_date.ptr, 8) != 0) {
        snprintf(msg, sizeof(msg),
                 "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
                 "date from HTTP: '%.*s' != '%.8s', from '%.*s'.",
                 (int)a->date.len, a->date.ptr, amz_date.ptr, (int)amz_date.len, amz_date.ptr);
        return refuse(out, "InvalidSignatureException", msg, "scope date");
    }
    if (!gw_str_eq(a->region, gw_str_c(k->region)))
        return refuse(out, "InvalidSignatureException",
                      "Credential should be scoped to a valid region. ", "scope region");
    if (!gw_str_eq(a->service, gw_str_c(k->service))) {
        snprintf(msg, sizeof(msg), "Credential should be scoped to correct service: '%s'. ",
                 k->service);
        return refuse(out, "InvalidSignatureException", msg, "scope service");
    }
    if (!gw_str_eq(a->terminator, GW_STR_LIT("aws4_request"))) {
        snprintf(msg, sizeof(msg),
                 "Credential should be scoped with a valid terminator: 'aws4_request', not "
                 "'%.*s'. ",
                 (int)a->terminator.len, a->terminator.ptr);
        return refuse(out, "InvalidSignatureException", msg, "scope terminator");
    }
    return true;
}

bool
bench_sigv4_verify(const struct bench_sigv4_creds *k, const struct bench_sigv4_req *r,
                   struct bench_sigv4_refusal *out, struct gw_buf *creq)
{
    struct authz a = {0};
    struct gw_str amz_date, claimed;
    struct gw_buf sts = {0};
    char body_hash[65], creq_hash[65], sig[65];
    int64_t t;
    bool ok;

    if (!parse_authz(r, &a, out))
        return false;
    (void)header(r, "x-amz-date", &amz_date);
    if (!parse_amz_date(amz_date, &t))
        return refuse(out, "IncompleteSignatureException",
                      "Date must be in ISO-8601 'basic format'. Got an x-amz-date that is not "
                      "YYYYMMDD'T'HHMMSS'Z'.",
                      "x-amz-date malformed");
    if (!check_identity(k, r, &a, out) || !check_scope(k, &a, amz_date, out) ||
        !date_in_window(r, amz_date, t, out))
        return false;
    sha256_hex(r->body, r->body_len, body_hash);
    if (header(r, "x-amz-content-sha256", &claimed) &&
        !gw_str_eq(claimed, (struct gw_str){body_hash, 64}))
        return refuse(out, "InvalidSignatureException", BAD_SIG,
                      "x-amz-content-sha256 is not the SHA-256 of the body");
    gw_buf_reset(creq);
    canonical_request(r, &a, body_hash, creq);
    sha256_hex(creq->data, creq->len, creq_hash);
    (void)gw_buf_printf(&sts, ALG "\n%.*s\n%.*s/%.*s/%.*s/aws4_request\n%s", (int)amz_date.len,
                        amz_date.ptr, (int)a.date.len, a.date.ptr, (int)a.region.len, a.region.ptr,
                        (int)a.service.len, a.service.ptr, creq_hash);
    signature(k, &a, &sts, sig);
    gw_buf_fini(&sts);
    ok = a.signature.len == 64 && gw_ct_equal(a.signature.ptr, sig, 64);
    return ok ? true : refuse(out, "InvalidSignatureException", BAD_SIG, "signature differs");
}
