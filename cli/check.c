/* SPDX-License-Identifier: MIT
 * cli/check.c - `gwctl check FILE`: validates a config file offline with the gateway's
 * own parser (gw_conf_parse), printing what `gwd --check` prints: one line per problem
 * on stdout and exit 1, or "FILE: ok" and exit 0. Secrets are resolved from this
 * process's environment, so an unset key variable is reported as it would be by gwd.
 * Owns:    the file's bytes and the parsed config of one call.
 * Threads: the main thread only; reads one file.
 * See:     cli/cli.h, core/conf.h, docs/gwctl.md
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cli/cli.h"
#include "core/alloc.h"
#include "core/codes.h"
#include "core/conf.h"
#include "core/str.h"

#define CHECK_MAX_FILE (16u * 1024 * 1024)

static const char *
env_get(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

static void
env_sha256(const void *data, size_t len, unsigned char out[32])
{
    unsigned int n = 32;

    if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

/* Reads all of <path> into <b>; -1 with errno set (EFBIG past CHECK_MAX_FILE). */
static int
read_file(const char *path, struct gw_buf *b)
{
    FILE *f = fopen(path, "rb");
    char chunk[65536];
    size_t n;

    if (!f)
        return -1;
    errno = 0;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b->len + n > CHECK_MAX_FILE) {
            fclose(f);
            errno = EFBIG;
            return -1;
        }
        if (gw_buf_append(b, chunk, n) != GW_OK) {
            fclose(f);
            errno = ENOMEM;
            return -1;
        }
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;

        fclose(f);
        errno = e;
        return -1;
    }
    fclose(f);
    return 0;
}

static void
print_json_result(const struct gw_conf_problems *probs, const char *io_error, enum gw_code rc)
{
    json_t *arr = json_array(), *j;
    size_t i;

    for (i = 0; probs && i < probs->n; i++) {
        const struct gw_conf_problem *p = &probs->v[i];

        json_array_append_new(arr,
                              json_pack("{s:s,s:s?,s:s?,s:s?}", "code", gw_code_str(p->code),
                                        "path", p->path, "value", p->value, "message", p->msg));
    }
    if (io_error)
        json_array_append_new(arr, json_pack("{s:s,s:n,s:n,s:s}", "code", "config.io", "path",
                                             "value", "message", io_error));
    else if (rc != GW_OK && json_array_size(arr) == 0)
        json_array_append_new(arr, json_pack("{s:s,s:n,s:n,s:s}", "code", gw_code_str(rc), "path",
                                             "value", "message", "refused"));
    j = json_pack("{s:b,s:o}", "ok", json_array_size(arr) == 0, "problems", arr);
    json_dumpf(j, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    json_decref(j);
}

/* The price table the config names, checked as gwd loads it (net/main.c): a missing
 * default prices.yaml is no table; a missing explicit one is an I/O problem (<*io>, a
 * message), a refused one fills <probs> with its problems. */
static enum gw_code
check_prices(struct gw_conf *conf, struct gw_conf_problems *probs, char **io)
{
    struct gw_prices *prices = NULL;
    struct gw_buf b = {0};
    enum gw_code rc;

    if (read_file(conf->prices_path, &b) != 0) {
        int e = errno;
        struct gw_buf msg = {0};

        gw_buf_fini(&b);
        if (e == ENOENT && !conf->prices_explicit)
            return GW_OK;
        gw_buf_printf(&msg, "%s: %s (config.io) cannot read the price table", conf->prices_path,
                      strerror(e));
        *io = msg.data;
        return GW_E_CFG_IO;
    }
    rc = gw_prices_parse(b.data ? b.data : "", b.len, &prices, probs);
    gw_buf_fini(&b);
    if (rc == GW_OK)
        gw_conf_set_prices(conf, &prices);
    return rc;
}

/* providers[].ca_file as gwd reads it (net/egress.c): readable, a PEM certificate in it. */
static const char *
check_ca_file(void *arg, const char *path, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    X509 *crt;

    (void)arg;
    if (!f) {
        snprintf(why, why_size, "cannot read the file: %s", strerror(errno));
        return why;
    }
    crt = PEM_read_X509_AUX(f, NULL, NULL, NULL);
    fclose(f);
    ERR_clear_error();
    if (!crt) {
        snprintf(why, why_size, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        return why;
    }
    X509_free(crt);
    return NULL;
}

static int
no_passphrase(char *buf, int size, int rwflag, void *arg)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)arg;
    return -1; /* an encrypted key is refused, never prompted for */
}

/* server.tls.cert and .key as gwd reads them (net/tls.c, same sentences): a PEM
 * certificate, a PEM private key without passphrase, and the key the certificate's. */
static enum gw_code
check_tls(void *arg, const char *cert, const char *key, char *why, size_t why_size)
{
    FILE *f = fopen(cert, "rb");
    enum gw_code rc = GW_OK;
    EVP_PKEY *k = NULL;
    X509 *crt = NULL;

    (void)arg;
    if (!f) {
        snprintf(why, why_size, "cannot read the file: %s", strerror(errno));
        return GW_E_CFG_TLS_CERT;
    }
    crt = PEM_read_X509_AUX(f, NULL, no_passphrase, NULL);
    fclose(f);
    if (!crt) {
        snprintf(why, why_size, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        ERR_clear_error();
        return GW_E_CFG_TLS_CERT;
    }
    f = fopen(key, "rb");
    if (!f) {
        snprintf(why, why_size, "cannot read the file: %s", strerror(errno));
        rc = GW_E_CFG_TLS_KEY;
    } else {
        k = PEM_read_PrivateKey(f, NULL, no_passphrase, NULL);
        fclose(f);
        if (!k) {
            snprintf(why, why_size,
                     "holds no PEM private key without a passphrase "
                     "(-----BEGIN PRIVATE KEY-----)");
            rc = GW_E_CFG_TLS_KEY;
        } else if (X509_check_private_key(crt, k) != 1) {
            snprintf(why, why_size,
                     "the private key does not match the certificate of server.tls.cert");
            rc = GW_E_CFG_TLS_KEY;
        }
    }
    ERR_clear_error();
    EVP_PKEY_free(k);
    X509_free(crt);
    return rc;
}

int
cli_cmd_check(const struct cli_opts *o, int argc, char **argv)
{
    struct gw_conf_env env = {env_get, env_sha256, NULL, check_ca_file, check_tls};
    struct gw_conf_problems probs = {0};
    struct gw_conf *conf = NULL;
    struct gw_buf yaml = {0};
    char *copy, dir[PATH_MAX], line[1024], *price_io = NULL;
    enum gw_code rc;
    size_t i;

    if (argc != 2) {
        fprintf(stderr, "gwctl: check needs exactly one FILE\n");
        return cli_usage();
    }
    if (read_file(argv[1], &yaml) != 0) {
        int e = errno;

        snprintf(line, sizeof(line), "cannot read the config file: %s", strerror(e));
        if (o->json)
            print_json_result(NULL, line, GW_E_CFG_IO);
        else
            printf("%s: %s (config.io) cannot read the config file\n", argv[1], strerror(e));
        gw_buf_fini(&yaml);
        return CLI_EXIT_ERROR;
    }
    copy = gw_strdup(argv[1]);
    if (!copy) {
        gw_buf_fini(&yaml);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    /* Relative paths in the file resolve against its folder, as in gwd. */
    if (!realpath(dirname(copy), dir))
        snprintf(dir, sizeof(dir), ".");
    rc = gw_conf_parse(yaml.data ? yaml.data : "", yaml.len, dir, &env, &conf, &probs);
    if (rc == GW_OK)
        rc = check_prices(conf, &probs, &price_io);
    if (o->json && price_io) {
        print_json_result(NULL, price_io, GW_E_CFG_IO);
    } else if (o->json) {
        print_json_result(&probs, NULL, rc);
    } else if (rc == GW_OK) {
        printf("%s: ok\n", argv[1]);
    } else if (price_io) {
        printf("prices: %s\n", price_io);
    } else {
        for (i = 0; i < probs.n; i++) {
            gw_conf_problem_format(&probs.v[i], line, sizeof(line));
            /* problems of the price table name its file first, as gwd --check does */
            printf("%s%s%s\n", conf ? conf->prices_path : "", conf ? ": " : "", line);
        }
        if (probs.n == 0)
            printf("%s: (%s) the config was refused\n", argv[1], gw_code_str(rc));
    }
    if (conf)
        gw_conf_free(conf);
    gw_conf_problems_fini(&probs);
    gw_free(price_io);
    gw_free(copy);
    gw_buf_fini(&yaml);
    return rc == GW_OK ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}
