/* SPDX-License-Identifier: MIT
 * core/conf.h - the configuration model (DESIGN.md 3, 18): parse YAML bytes with
 * libcyaml, apply defaults, validate, and produce an immutable snapshot.
 * Pure: the caller reads the file and passes the bytes, an environment lookup and a
 * SHA-256 function, so this module does no I/O.
 * Owns:    a struct gw_conf owns every string and array inside it.
 * Threads: parse/validate on any thread (main at startup and reload, control for --check);
 *          a published snapshot is read-only and shared by all threads.
 * See:     core/conf.c, core/conf_schema.c, etc/gw.example.yaml, tests/unit/core/test_conf.c
 */
#ifndef GW_CORE_CONF_H
#define GW_CORE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ck_epoch.h>

#include "core/codes.h"

enum gw_dialect {
    GW_DIALECT_OPENAI = 0,   /* OpenAI Chat Completions */
    GW_DIALECT_RESPONSES,
    GW_DIALECT_ANTHROPIC,
    GW_DIALECT_GEMINI,
};

/* "host:port"; host may be an IPv4 literal, "[v6]" or a name. */
struct gw_conf_addr {
    char *host;              /* without brackets */
    uint16_t port;
};

struct gw_conf_cred {
    char *env;               /* the variable named in the file, or NULL */
    char *secret;            /* resolved value (from env or value); never logged */
};

struct gw_conf_provider {
    char *name;
    enum gw_dialect dialect;
    char *base_url;          /* as written */
    bool tls;                /* https */
    char *host;              /* from base_url, without brackets */
    uint16_t port;           /* from base_url, default 443/80 */
    char *path_prefix;       /* base_url's path without a trailing '/', "" when none */
    struct gw_conf_cred *keys;
    size_t n_keys;
    char **models;           /* as listed; "*" matches every model */
    size_t n_models;
    bool any_model;          /* models contains "*" */
    bool enabled;            /* default true */
    unsigned max_concurrent; /* 0 = unlimited */
    unsigned index;          /* position in the file */
};

struct gw_conf_client {
    char *name;
    unsigned char key_digest[32]; /* SHA-256 of the gateway key */
    char *key_env;           /* when the key came from the environment */
    char **models;           /* scope; n_models == 0 means every model */
    size_t n_models;
    unsigned max_concurrent; /* 0 = unlimited */
};

struct gw_conf {
    struct {
        struct gw_conf_addr *listen;
        size_t n_listen;
        unsigned workers;          /* 0 in the file = one per core; resolved by net */
        unsigned max_body_mb;      /* default 32 */
        unsigned max_header_kb;    /* default 64: total request head size */
        unsigned max_headers;      /* default 100 */
        unsigned header_timeout_secs; /* default 10: time to receive a request head */
        unsigned idle_timeout_secs;   /* default 60: keep-alive idle, body read stall */
        unsigned drain_secs;       /* default 30 */
        char *tls_cert;            /* resolved path or NULL */
        char *tls_key;
    } server;
    struct {
        struct gw_conf_addr listen; /* default 127.0.0.1:8081 */
        char *token_env;            /* default GW_CONTROL_TOKEN */
        char *token;                /* resolved; NULL = control API refuses all but /healthz */
    } control;
    struct {
        char *path;                 /* resolved against the config file's folder */
        unsigned map_size_mb;       /* default 4096 */
    } store;
    struct {
        unsigned row_days;          /* default 31 */
    } retention;
    struct {
        unsigned failures_to_pause; /* default 3 */
        unsigned pause_secs;        /* default 60 */
        unsigned max_pause_secs;    /* default 600 */
        unsigned stream_start_wait_secs; /* default 15 */
        bool next_on_slow_start;    /* default false */
        unsigned slot_wait_secs;    /* default 30 */
        unsigned connect_timeout_ms;     /* default 10000 */
        unsigned first_byte_timeout_secs;/* default 300: upstream answer head (non-stream) */
        unsigned read_idle_timeout_secs; /* default 300: silence in an upstream body */
    } failover;
    struct gw_conf_provider *providers;
    size_t n_providers;
    struct gw_conf_client *clients;
    size_t n_clients;
    char *dir;                      /* the config file's folder */
    uint64_t generation;            /* set by the publisher */
    unsigned ref;                   /* core/snap.c: references (live pointer holds one) */
    ck_epoch_entry_t epoch_entry;   /* core/snap.c: retirement */
};

/* One refusal: "<path>: <value> (<code>) <msg>". */
struct gw_conf_problem {
    enum gw_code code;
    char *path;              /* "providers[1].base_url" */
    char *value;             /* the offending value as written (secrets never) */
    char *msg;               /* human text */
};

struct gw_conf_problems {
    struct gw_conf_problem *v;
    size_t n;
};

/* Environment access handed in by the caller (core reads no environment itself). */
struct gw_conf_env {
    const char *(*getenv)(void *arg, const char *name); /* NULL when unset */
    void (*sha256)(const void *data, size_t len, unsigned char out[32]);
    void *arg;
};

/* Parses and validates <len> bytes of YAML. <dir> is the file's folder (relative
 * paths resolve against it). On success returns GW_OK and a new config in <*out>
 * (caller frees with gw_conf_free). On refusal returns the first problem's code, sets
 * <*out> to NULL and fills <probs> with every problem found (caller frees with
 * gw_conf_problems_fini). GW_E_NOMEM when out of memory. Any thread; never blocks. */
enum gw_code gw_conf_parse(const char *yaml, size_t len, const char *dir,
                           const struct gw_conf_env *env, struct gw_conf **out,
                           struct gw_conf_problems *probs);

void gw_conf_free(struct gw_conf *c);
void gw_conf_problems_fini(struct gw_conf_problems *p);

/* Formats one problem as "<path>: <value> (<code>) <msg>" into <buf> (NUL-terminated,
 * truncated to <size>). */
void gw_conf_problem_format(const struct gw_conf_problem *p, char *buf, size_t size);

/* The enabled providers that list <model> (or "*"), in file order, into <out> (at most
 * <max>); returns how many. */
size_t gw_conf_candidates(const struct gw_conf *c, const char *model, size_t model_len,
                          const struct gw_conf_provider **out, size_t max);

/* The client whose key digest equals <digest> (constant-time over all clients), or NULL. */
const struct gw_conf_client *gw_conf_client_by_digest(const struct gw_conf *c,
                                                      const unsigned char digest[32]);

/* True when <cl> may use <model> (no scope, or listed). */
bool gw_conf_client_allows(const struct gw_conf_client *cl, const char *model, size_t len);

const char *gw_dialect_str(enum gw_dialect d);

#endif
