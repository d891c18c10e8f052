/* SPDX-License-Identifier: MIT
 * net/egress.c - providers[].ca_file: read, checked and turned into client SSL_CTXs,
 * kept in a small list for the life of the process (see net/egress.h).
 * Owns:    the list and its contexts.
 * Threads: main only for the list; contexts are shared read-only afterwards (SSL_new
 *          on a shared SSL_CTX is thread-safe).
 * See:     net/egress.h, net/upstream.c (net_upstream_ssl_ctx_new, pool keys)
 */
#include "net/egress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "core/alloc.h"
#include "net/tls.h"
#include "net/upstream.h"

#define EGRESS_CA_MAX (16u << 20) /* bytes of a CA file: a full system bundle is ~200 KB */

struct egress_ctx {
    struct egress_ctx *next;
    char *path;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SSL_CTX *ctx;
};

static struct egress_ctx *egress_list; /* main thread only */

char *
net_file_read(const char *path, size_t max, size_t *lenp, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    char *data;
    size_t len;

    why[0] = '\0';
    if (!f) {
        snprintf(why, why_size, "cannot read the file: %s", strerror(errno));
        return NULL;
    }
    data = malloc(max + 1);
    if (!data) {
        fclose(f);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    len = fread(data, 1, max + 1, f);
    if (ferror(f))
        snprintf(why, why_size, "cannot read the file: %s", strerror(errno));
    else if (len > max)
        snprintf(why, why_size, "larger than %zu MB", max >> 20);
    else if (len == 0)
        snprintf(why, why_size, "the file is empty");
    fclose(f);
    if (why[0]) {
        free(data);
        return NULL;
    }
    data[len] = '\0';
    *lenp = len;
    return data;
}

/* A client context trusting the PEM certificates in <data> besides the system CAs.
 * NULL with <why> set when there is none (or out of memory). */
static SSL_CTX *
ctx_from_pem(const char *data, size_t len, char *why, size_t why_size)
{
    SSL_CTX *ctx = net_upstream_ssl_ctx_new();
    BIO *bio = ctx ? BIO_new_mem_buf(data, (int)len) : NULL;
    X509_STORE *st = ctx ? SSL_CTX_get_cert_store(ctx) : NULL;
    unsigned n = 0;
    X509 *crt;

    if (!bio) {
        snprintf(why, why_size, "out of memory");
        SSL_CTX_free(ctx);
        return NULL;
    }
    while ((crt = PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL))) {
        /* A certificate already in the system store is not an error. */
        if (X509_STORE_add_cert(st, crt) == 1 ||
            ERR_GET_REASON(ERR_peek_last_error()) == X509_R_CERT_ALREADY_IN_HASH_TABLE)
            n++;
        X509_free(crt);
    }
    ERR_clear_error(); /* the end of the file reads as "no start line" */
    BIO_free(bio);
    if (n == 0) {
        snprintf(why, why_size, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The context for <path>: the one already made for the same content, or a new one.
 * NULL with <why> set when the file is refused. */
static SSL_CTX *
ctx_for(const char *path, char *why, size_t why_size)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    struct egress_ctx *e;
    size_t len = 0;
    char *data = net_file_read(path, EGRESS_CA_MAX, &len, why, why_size);
    SSL_CTX *ctx;

    if (!data)
        return NULL;
    SHA256((const unsigned char *)data, len, digest);
    for (e = egress_list; e; e = e->next)
        if (strcmp(e->path, path) == 0 && memcmp(e->digest, digest, sizeof(digest)) == 0) {
            free(data);
            return e->ctx;
        }
    ctx = ctx_from_pem(data, len, why, why_size);
    free(data);
    if (!ctx)
        return NULL;
    e = gw_calloc(1, sizeof(*e));
    if (!e || !(e->path = gw_strdup(path))) {
        gw_free(e);
        SSL_CTX_free(ctx);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    memcpy(e->digest, digest, sizeof(digest));
    e->ctx = ctx;
    e->next = egress_list;
    egress_list = e;
    return ctx;
}

const char *
net_egress_ca_check(void *arg, const char *path, char *why, size_t why_size)
{
    size_t len = 0;
    char *data = net_file_read(path, EGRESS_CA_MAX, &len, why, why_size);
    SSL_CTX *ctx;

    (void)arg;
    if (!data)
        return why;
    ctx = ctx_from_pem(data, len, why, why_size);
    free(data);
    if (!ctx)
        return why;
    SSL_CTX_free(ctx);
    return NULL;
}

bool
net_egress_attach(struct gw_conf *conf, struct gw_conf_problems *probs)
{
    bool ok = true;
    size_t i;

    for (i = 0; i < conf->n_providers; i++) {
        struct gw_conf_provider *p = &conf->providers[i];
        char why[256] = "", path[128];

        p->tls_ctx = NULL;
        if (!p->ca_file)
            continue;
        p->tls_ctx = ctx_for(p->ca_file, why, sizeof(why));
        if (p->tls_ctx)
            continue;
        ok = false;
        snprintf(path, sizeof(path), "providers[%zu] (%s).ca_file", i, p->name ? p->name : "");
        if (gw_conf_problem_add(probs, GW_E_CFG_CA_FILE, path, p->ca_file, "%s", why) != GW_OK)
            break;
    }
    return ok;
}

void
net_egress_shutdown(void)
{
    struct egress_ctx *e;

    while ((e = egress_list)) {
        egress_list = e->next;
        SSL_CTX_free(e->ctx);
        gw_free(e->path);
        gw_free(e);
    }
}

static const char *
conf_getenv(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

static void
conf_sha256(const void *data, size_t len, unsigned char out[32])
{
    SHA256(data, len, out);
}

const struct gw_conf_env net_conf_env = {conf_getenv, conf_sha256, NULL, net_egress_ca_check,
                                         net_tls_check};
