/* SPDX-License-Identifier: MIT
 * net/tls.c - server.tls: the certificate chain and private key read into a server
 * SSL_CTX (TLS 1.2 and 1.3, ALPN), kept in a small list for the life of the process,
 * and the accepted side of a TLS connection (bufferevent_openssl over the socket).
 * Owns:    the list and its contexts.
 * Threads: main only for the list; contexts are shared read-only afterwards; the
 *          bufferevent and handshake functions run on the connection's worker.
 * See:     net/tls.h, net/http1.c, net/egress.c (the client side's contexts)
 */
#include "net/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/alloc.h"
#include "core/log.h"
#include "net/egress.h"
#include "net/net-priv.h"

#define TLS_FILE_MAX (1u << 20) /* bytes of a certificate chain or key file */

struct tls_ctx {
    struct tls_ctx *next;
    char *cert, *key;
    unsigned char digest[2][SHA256_DIGEST_LENGTH]; /* of the two files' content */
    SSL_CTX *ctx;
};

static struct tls_ctx *tls_list; /* main thread only */

/* ---- reading the files ---- */

/* A passphrase is never asked for: an encrypted key is refused, not prompted for on a
 * terminal that a daemon does not have. */
static int
no_passphrase(char *buf, int size, int rwflag, void *arg)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)arg;
    return -1;
}

/* OpenSSL's reason for the last error, or <fallback>; clears the error queue. */
static const char *
ssl_reason(const char *fallback)
{
    const char *r = ERR_reason_error_string(ERR_peek_last_error());

    ERR_clear_error();
    return r ? r : fallback;
}

/* ---- the server context ---- */

/* ALPN: h2 (net/http2.c) before http/1.1, whatever order the client offers them in. A
 * client offering neither gets no ALPN answer (not a fatal alert): it speaks HTTP/1.1 or
 * fails on its own terms. */
static int
on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
        unsigned inlen, void *arg)
{
    static const unsigned char ours[] = "\x02h2\x08http/1.1";
    unsigned char *sel = NULL;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
server_ctx_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (!ctx)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* No renegotiation (a client could make the server redo handshakes at will), no
     * compression (CRIME). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A client that closes without close_notify has simply gone (the HTTP framing says
     * whether a request was whole). */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    /* Idle keep-alive connections hold no TLS buffers. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* Resumption by stateless tickets only: a shared session cache would be one lock
     * every worker's handshakes meet. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
    return ctx;
}

/* The chain (leaf first) of <cert> into <ctx>: GW_OK, or GW_E_CFG_TLS_CERT with <why>. */
static enum gw_code
use_chain(SSL_CTX *ctx, const char *pem, size_t len, char *why, size_t why_size)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509 *x = bio ? PEM_read_bio_X509_AUX(bio, NULL, no_passphrase, NULL) : NULL;
    enum gw_code rc = GW_OK;

    if (!x) {
        ERR_clear_error();
        snprintf(why, why_size, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        BIO_free(bio);
        return GW_E_CFG_TLS_CERT;
    }
    if (SSL_CTX_use_certificate(ctx, x) != 1) {
        snprintf(why, why_size, "the certificate cannot be used: %s", ssl_reason("refused"));
        rc = GW_E_CFG_TLS_CERT;
    }
    X509_free(x);
    /* The intermediates that follow the leaf, sent with it in the handshake. */
    while (rc == GW_OK && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL))) {
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
            X509_free(x);
            snprintf(why, why_size, "a chain certificate cannot be used: %s",
                     ssl_reason("refused"));
            rc = GW_E_CFG_TLS_CERT;
        }
    }
    ERR_clear_error(); /* the end of the file reads as "no start line" */
    BIO_free(bio);
    return rc;
}

/* The private key into <ctx>, checked against its certificate: GW_OK, or
 * GW_E_CFG_TLS_KEY with <why>. */
static enum gw_code
use_key(SSL_CTX *ctx, const char *pem, size_t len, char *why, size_t why_size)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    enum gw_code rc = GW_OK;

    BIO_free(bio);
    if (!k) {
        ERR_clear_error();
        snprintf(why, why_size,
                 "holds no PEM private key without a passphrase "
                 "(-----BEGIN PRIVATE KEY-----)");
        return GW_E_CFG_TLS_KEY;
    }
    if (SSL_CTX_use_PrivateKey(ctx, k) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(why, why_size,
                 "the private key does not match the certificate of server.tls.cert");
        rc = GW_E_CFG_TLS_KEY;
    }
    EVP_PKEY_free(k);
    return rc;
}

/* A server context from the two files' contents; NULL with <*code> and <why> set. */
static SSL_CTX *
ctx_from_pem(const char *cert, size_t cert_len, const char *key, size_t key_len, enum gw_code *code,
             char *why, size_t why_size)
{
    SSL_CTX *ctx = server_ctx_new();

    if (!ctx) {
        ERR_clear_error();
        snprintf(why, why_size, "out of memory");
        *code = GW_E_CFG_TLS_CERT;
        return NULL;
    }
    *code = use_chain(ctx, cert, cert_len, why, why_size);
    if (*code == GW_OK)
        *code = use_key(ctx, key, key_len, why, why_size);
    if (*code != GW_OK) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* Reads both files (NULL with <*code> and <why> set when one cannot be read). */
static bool
read_pair(const char *cert, const char *key, char **cdata, size_t *clen, char **kdata, size_t *klen,
          enum gw_code *code, char *why, size_t why_size)
{
    *kdata = NULL;
    *cdata = net_file_read(cert, TLS_FILE_MAX, clen, why, why_size);
    if (!*cdata) {
        *code = GW_E_CFG_TLS_CERT;
        return false;
    }
    *kdata = net_file_read(key, TLS_FILE_MAX, klen, why, why_size);
    if (!*kdata) {
        free(*cdata);
        *cdata = NULL;
        *code = GW_E_CFG_TLS_KEY;
        return false;
    }
    return true;
}

enum gw_code
net_tls_check(void *arg, const char *cert, const char *key, char *why, size_t why_size)
{
    char *cdata, *kdata;
    size_t clen = 0, klen = 0;
    enum gw_code code = GW_OK;
    SSL_CTX *ctx;

    (void)arg;
    if (!read_pair(cert, key, &cdata, &clen, &kdata, &klen, &code, why, why_size))
        return code;
    ctx = ctx_from_pem(cdata, clen, kdata, klen, &code, why, why_size);
    explicit_bzero(kdata, klen);
    free(kdata);
    free(cdata);
    SSL_CTX_free(ctx);
    return code;
}

/* The context for the pair: the one already made for the same paths and content, or a
 * new one. NULL with <*code> and <why> set when the files are refused. */
static SSL_CTX *
ctx_for(const char *cert, const char *key, enum gw_code *code, char *why, size_t why_size)
{
    unsigned char digest[2][SHA256_DIGEST_LENGTH];
    char *cdata, *kdata;
    size_t clen = 0, klen = 0;
    struct tls_ctx *e;
    SSL_CTX *ctx;

    if (!read_pair(cert, key, &cdata, &clen, &kdata, &klen, code, why, why_size))
        return NULL;
    SHA256((const unsigned char *)cdata, clen, digest[0]);
    SHA256((const unsigned char *)kdata, klen, digest[1]);
    for (e = tls_list; e; e = e->next)
        if (strcmp(e->cert, cert) == 0 && strcmp(e->key, key) == 0 &&
            memcmp(e->digest, digest, sizeof(digest)) == 0)
            break;
    ctx = e ? e->ctx : ctx_from_pem(cdata, clen, kdata, klen, code, why, why_size);
    explicit_bzero(kdata, klen);
    free(kdata);
    free(cdata);
    if (e || !ctx)
        return ctx;
    e = gw_calloc(1, sizeof(*e));
    if (!e || !(e->cert = gw_strdup(cert)) || !(e->key = gw_strdup(key))) {
        if (e)
            gw_free(e->cert);
        gw_free(e);
        SSL_CTX_free(ctx);
        *code = GW_E_CFG_TLS_CERT;
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    memcpy(e->digest, digest, sizeof(digest));
    e->ctx = ctx;
    e->next = tls_list;
    tls_list = e;
    return ctx;
}

bool
net_tls_attach(struct gw_conf *conf, struct gw_conf_problems *probs)
{
    enum gw_code code = GW_OK;
    char why[256] = "";
    bool is_key;

    conf->server.tls_ctx = NULL;
    if (!conf->server.tls_cert || !conf->server.tls_key)
        return true;
    conf->server.tls_ctx =
        ctx_for(conf->server.tls_cert, conf->server.tls_key, &code, why, sizeof(why));
    if (conf->server.tls_ctx)
        return true;
    is_key = code == GW_E_CFG_TLS_KEY;
    gw_conf_problem_add(probs, is_key ? GW_E_CFG_TLS_KEY : GW_E_CFG_TLS_CERT,
                        is_key ? "server.tls.key" : "server.tls.cert",
                        is_key ? conf->server.tls_key : conf->server.tls_cert, "%s", why);
    return false;
}

void
net_tls_shutdown(void)
{
    struct tls_ctx *e;

    while ((e = tls_list)) {
        tls_list = e->next;
        SSL_CTX_free(e->ctx);
        gw_free(e->cert);
        gw_free(e->key);
        gw_free(e);
    }
}

/* ---- connections ---- */

struct bufferevent *
net_tls_bev_new(struct event_base *base, int fd, void *ctx)
{
    SSL *ssl = SSL_new(ctx);
    struct bufferevent *bev;

    if (!ssl) {
        ERR_clear_error();
        return NULL;
    }
    /* On failure libevent frees neither the SSL nor the socket (its BIO does not own
     * the descriptor until the bufferevent exists). */
    bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                         BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

bool
net_tls_on_handshake(struct net_conn *c)
{
    const unsigned char *proto = NULL;
    unsigned len = 0;
    SSL *ssl;

    ssl = bufferevent_openssl_get_ssl(c->bev);
    if (ssl)
        SSL_get0_alpn_selected(ssl, &proto, &len);
    if (len != 2 || memcmp(proto, "h2", 2) != 0)
        return false;
    net_h2_start(c);
    return true;
}

void
net_tls_on_error(struct net_conn *c)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
    unsigned long e = bufferevent_get_openssl_error(c->bev);
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    struct gw_log_ctx ctx = {(int)c->w->id, c->id, NULL};

    if (!ssl || SSL_is_init_finished(ssl) || !gw_log_enabled(GW_LOG_DEBUG))
        return;
    GW_LOG(GW_LOG_DEBUG, &ctx, "tls_handshake_failed", "TLS handshake with a client failed: %s",
           why ? why : "the connection closed");
}

void
net_tls_close_notify(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    /* Only after a completed handshake and once: SSL_shutdown is refused otherwise. A
     * socket that will not take it now is closed anyway: best effort. */
    if (ssl && SSL_is_init_finished(ssl) && !(SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN))
        SSL_shutdown(ssl);
    ERR_clear_error();
}
