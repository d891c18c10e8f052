/* SPDX-License-Identifier: MIT
 * core/conf.h - the configuration model (DESIGN.md 3, 18): parse YAML bytes with
 * libcyaml, apply defaults, validate, and produce an immutable snapshot.
 * Pure: the caller reads the file and passes the bytes, an environment lookup and a
 * SHA-256 function, so this module does no I/O.
 * Owns:    a struct gw_conf owns every string and array inside it.
 * Threads: parse/validate on any thread (main at startup and reload, control for --check);
 *          a published snapshot is read-only and shared by all threads.
 * See:     core/conf.c, core/conf_schema.c, core/conf_prices.c, etc/gw.example.yaml,
 *          etc/prices.yaml, tests/unit/core/test_conf.c, tests/unit/core/test_prices.c
 */
#ifndef GW_CORE_CONF_H
#define GW_CORE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ck_epoch.h>

#include "core/codes.h"

struct gw_upstate;
struct gw_wrr;
struct gw_slots;
struct gw_quota_reg;
struct gw_keylimits;

enum gw_dialect {
    GW_DIALECT_OPENAI = 0, /* OpenAI Chat Completions */
    GW_DIALECT_RESPONSES,
    GW_DIALECT_ANTHROPIC,
    GW_DIALECT_GEMINI,
    GW_DIALECT_BEDROCK, /* AWS Bedrock Converse (aws: instead of keys:) */
};

enum gw_billing {
    GW_BILLING_METERED = 0, /* usage costs what prices.yaml / model_specs say */
    GW_BILLING_FREE,        /* counted at $0 */
};

enum gw_quota_pool {
    GW_QUOTA_POOL_MODEL = 0, /* one quota per (provider, model, credential) */
    GW_QUOTA_POOL_ACCOUNT,   /* one quota across all models of a credential */
};

enum gw_group_type {
    GW_GROUP_FALLBACK = 0,
    GW_GROUP_LOAD_BALANCE,
    GW_GROUP_URL_TEST,
    GW_GROUP_CHEAPEST,
};

enum gw_balance_by {
    GW_BALANCE_WEIGHTS = 0, /* the default */
    GW_BALANCE_LATENCY,
    GW_BALANCE_HEALTH,
    GW_BALANCE_LATENCY_HEALTH,
};

enum gw_limit_per {
    GW_LIMIT_MINUTE = 0, /* rolling */
    GW_LIMIT_HOUR,       /* rolling */
    GW_LIMIT_DAY,        /* local calendar */
    GW_LIMIT_WEEK,       /* local calendar, from Monday */
    GW_LIMIT_MONTH,      /* local calendar */
};

/* "host:port"; host may be an IPv4 literal, "[v6]" or a name. */
struct gw_conf_addr {
    char *host; /* without brackets */
    uint16_t port;
};

struct gw_conf_cred {
    char *env;    /* the variable named in the file, or NULL */
    char *secret; /* resolved value (from env or value); never logged */
    /* gw_quota_fingerprint of the secret (12 hex characters), the only form rows, views
     * and logs show; set by net before the snapshot is published (net/quota.c) */
    char fp[13];
};

/* providers[].model_specs.<model>: wins over prices.yaml field by field (DESIGN.md 9);
 * read through gw_conf_model_spec. A field not written is 0 / negative as noted. */
struct gw_conf_model_spec {
    char *model;
    uint64_t context_window;    /* tokens; 0 = not written */
    uint64_t max_output_tokens; /* tokens; 0 = not written */
    double input;               /* USD per 1M tokens; < 0 = not written */
    double output;
    double cache_read;
    double cache_write;
};

/* One quota window set (DESIGN.md 10); 0 = no limit on that axis (core/quota.h). */
struct gw_conf_quota_win {
    uint64_t rpm, tpm, rpd, tpd;
};

struct gw_conf_quota_model {
    char *model;
    struct gw_conf_quota_win win;
};

/* providers[].http2, in the order of the words of the file. */
enum gw_http2 {
    GW_HTTP2_AUTO,
    GW_HTTP2_ON,
    GW_HTTP2_OFF,
};

struct gw_conf_provider {
    char *name;
    enum gw_dialect dialect;
    char *base_url;    /* as written */
    bool tls;          /* https */
    char *host;        /* from base_url, without brackets */
    uint16_t port;     /* from base_url, default 443/80 */
    char *path_prefix; /* base_url's path without a trailing '/', "" when none */
    struct gw_conf_cred *keys;
    size_t n_keys;
    /* dialect bedrock (docs/config.md, "AWS Bedrock"): aws.region and the credentials
     * that sign each request (SigV4). keys then holds one entry, a copy of the secret
     * access key, so quotas, rows and fingerprints see one credential like any other. */
    char *aws_region;
    struct gw_conf_cred aws_key_id, aws_secret, aws_token; /* aws_token.secret NULL: none */
    char **models;                                         /* as listed; "*" matches every model */
    size_t n_models;
    bool any_model; /* models contains "*" */
    bool enabled;   /* default true */
    /* providers[].http2: auto (h2 when the https upstream's ALPN chooses it), on (h2
     * always: h2c with prior knowledge on http://, ALPN h2 only on https://), off
     * (HTTP/1.1 always). Default auto. net/upstream.c reads it per exchange. */
    enum gw_http2 http2;
    unsigned max_concurrent; /* 0 = unlimited */
    unsigned index;          /* position in the file */
    /* Accepted and stored, not yet used (later issues): */
    unsigned min_speed_tps;                 /* min_speed.tokens_per_sec; 0 = no minimum speed */
    unsigned min_speed_window_secs;         /* min_speed.window_secs */
    struct gw_conf_model_spec *model_specs; /* in file order */
    size_t n_model_specs;
    enum gw_billing billing; /* default metered */
    bool has_quota;          /* a quota section was written */
    struct gw_conf_quota_win quota_default;
    struct gw_conf_quota_model *quota_models;
    size_t n_quota_models;
    enum gw_quota_pool quota_pool; /* default model */
    /* quota.local_cooldown_cap_secs: a loopback / private upstream's cooldowns are capped
     * at this (default 5; 0 = no cap); quota.probes (default true). Both apply whether or
     * not a quota section was written (core/quota.h). */
    unsigned quota_local_cap_secs;
    bool quota_probes;
    /* Egress (docs/config.md, providers): the CONNECT proxy in effect, from
     * providers[].proxy, else the environment's https_proxy/HTTPS_PROXY (https
     * upstreams) or http_proxy/HTTP_PROXY (http ones) unless no_proxy/NO_PROXY exempts
     * the host (core/proxy.h). proxy_host NULL: connect directly. */
    char *proxy_host;
    uint16_t proxy_port;
    char *proxy_auth; /* "user:password" for Proxy-Authorization: Basic, or NULL; a secret */
    char *proxy_from; /* "proxy" (the file) or the variable's name; NULL when direct */
    char *ca_file;    /* providers[].ca_file, resolved against the config's folder, or NULL */
    /* net's SSL_CTX trusting ca_file besides the system CAs (net/egress.c), set by net
     * before publish and alive until the process ends; NULL: the default context. */
    void *tls_ctx;
    /* Shared mutable state, set by gw_routes_attach before the snapshot is published
     * (core/route.h); lives in the registry, not in the snapshot. */
    struct gw_upstate *state;
    struct gw_slots *slots; /* max_concurrent (core/slots.h), set by net before publish */
    /* Credentials and quota (core/quota.h), set by net before publish (net/quota.c): the
     * process's registry, and the name this provider's sets have in it (the provider's
     * name, '/', 8 hex characters of a digest of its keys' fingerprints: a reload that
     * changes the keys gets new sets). quota_reg NULL: keys[0] is sent, nothing counted. */
    struct gw_quota_reg *quota_reg;
    char quota_name[80];
};

/* A group member: written as a plain provider name, or as {name, weight, model}. */
struct gw_conf_member {
    char *provider;
    unsigned weight; /* default 1 */
    char *model;     /* NULL = the group's model */
    bool plain;      /* written as a plain name (so it is written back as one) */
    bool weight_set; /* a mapping member with `weight` written (written back only then) */
};

/* groups[] (DESIGN.md 3). Validated: members name providers, each once; weights 1..100
 * and balance_by only on load-balance; names unique (engine.* codes). */
struct gw_conf_group {
    char *name;
    enum gw_group_type type;
    char *model; /* NULL = the requested name */
    struct gw_conf_member *members;
    size_t n_members;
    enum gw_balance_by balance_by;
    bool balance_by_set; /* written in the file (written back only then) */
    unsigned index;
    struct gw_wrr *wrr; /* load-balance round state, set by gw_routes_attach */
};

/* clients[].limits[] (DESIGN.md 8): stored; validated and enforced by a later issue. */
struct gw_conf_limit {
    enum gw_limit_per per;
    bool has_requests, has_tokens, has_cost;
    uint64_t requests;
    uint64_t tokens;
    uint64_t cost_micros; /* USD * 1e6 */
    bool cache_reads;     /* tokens also count cache reads */
};

struct gw_conf_client {
    char *name;
    unsigned char key_digest[32]; /* SHA-256 of the gateway key */
    char *key_env;                /* when the key came from the environment */
    char **models;                /* scope; n_models == 0 means every model */
    size_t n_models;
    unsigned max_concurrent; /* 0 = unlimited */
    struct gw_conf_limit *limits;
    size_t n_limits;
    unsigned index;             /* position in the file */
    struct gw_slots *slots;     /* the key's max_concurrent permits, set by net before publish */
    struct gw_keylimits *usage; /* the key's usage totals (core/limits.h), set by net */
};

/* One row of the price table (etc/prices.yaml, DESIGN.md 9). A field not written is
 * negative (prices) or 0 (token counts). */
struct gw_price {
    char *model;                /* exact model id, unique in the table */
    double input;               /* USD per 1M uncached input tokens; < 0 = not given */
    double output;              /* USD per 1M output tokens (reasoning included) */
    double cache_read;          /* USD per 1M input tokens read from the prompt cache */
    double cache_write;         /* USD per 1M input tokens written to the prompt cache */
    uint64_t context_window;    /* tokens; 0 = not given */
    uint64_t max_output_tokens; /* tokens; 0 = not given */
};

/* The price table: rows sorted by model id (strcmp order) for binary search. Immutable
 * once built; owned by the config it is attached to (gw_conf_set_prices). */
struct gw_prices {
    struct gw_price *v;
    size_t n;
};

/* What one resolve function (gw_conf_model_spec) decides about a (provider, model):
 * providers[].model_specs wins over the price table field by field; billing free makes
 * the four prices 0. A value whose *_known flag is false is 0 and must not be used. */
struct gw_model_spec {
    double input, output, cache_read, cache_write; /* USD per 1M tokens */
    uint64_t context_window, max_output_tokens;    /* tokens */
    bool input_known, output_known, cache_read_known, cache_write_known;
    bool context_window_known, max_output_tokens_known;
};

struct gw_conf {
    struct {
        struct gw_conf_addr *listen;
        size_t n_listen;
        unsigned workers;              /* 0 in the file = one per core; resolved by net */
        unsigned max_body_mb;          /* default 32 */
        unsigned max_header_kb;        /* default 64: total request head size */
        unsigned max_headers;          /* default 100 */
        unsigned header_timeout_secs;  /* default 10: time to receive a request head */
        unsigned idle_timeout_secs;    /* default 60: keep-alive idle */
        unsigned body_timeout_secs;    /* default 60: time to receive a whole request body */
        unsigned max_buffered_body_mb; /* default 256: request bodies read or held at once */
        unsigned max_connections;      /* 0 (default): the descriptor limit's share, by net */
        unsigned drain_secs;           /* default 30 */
        char *tls_cert;                /* resolved path or NULL */
        char *tls_key;
        /* server.tls.listen: the addresses served in TLS beside the plain ones of
         * listen. Left out of a tls block: tls_on_listen, every listen address is TLS. */
        struct gw_conf_addr *tls_listen;
        size_t n_tls_listen;
        bool tls_on_listen;
        void *tls_ctx; /* SSL_CTX of tls_cert and tls_key, set by net (net/tls.h) */
    } server;
    struct {
        struct gw_conf_addr listen; /* default 127.0.0.1:8081 */
        char *token_env;            /* default GW_CONTROL_TOKEN */
        char *token;                /* resolved; NULL = control API refuses all but /healthz */
    } control;
    struct {
        int format; /* enum gw_log_format (core/log.h); default text */
        int level;  /* enum gw_log_level; default info */
    } log;
    struct {
        char *path;           /* resolved against the config file's folder */
        unsigned map_size_mb; /* default 4096 */
        bool responses;       /* default true: keep Responses conversations (DESIGN.md 11) */
    } store;
    struct {
        unsigned row_days; /* default 31 */
    } retention;
    struct {
        unsigned failures_to_pause;       /* default 3 */
        unsigned pause_secs;              /* default 60 */
        unsigned max_pause_secs;          /* default 600 */
        unsigned stream_start_wait_secs;  /* default 15 */
        bool next_on_slow_start;          /* default false */
        unsigned slot_wait_secs;          /* default 30 */
        unsigned connect_timeout_ms;      /* default 10000 */
        unsigned first_byte_timeout_secs; /* default 300: upstream answer head (non-stream) */
        unsigned read_idle_timeout_secs;  /* default 300: silence in an upstream body */
    } failover;
    struct gw_conf_provider *providers;
    size_t n_providers;
    struct gw_conf_client *clients;
    size_t n_clients;
    struct gw_conf_group *groups;
    size_t n_groups;
    /* `prices`, resolved against dir. When the key is absent it is the default
     * "prices.yaml" resolved the same way, and prices_explicit is false: the loader (net)
     * then treats a missing file as an empty table instead of an error. Never NULL in a
     * parsed config. */
    char *prices_path;
    bool prices_explicit;         /* `prices` was written in the file */
    struct gw_prices *prices;     /* the loaded table (gw_conf_set_prices); NULL = none */
    char *dir;                    /* the config file's folder */
    uint64_t generation;          /* set by the publisher */
    unsigned ref;                 /* core/snap.c: references (live pointer holds one) */
    ck_epoch_entry_t epoch_entry; /* core/snap.c: retirement */
};

/* One refusal: "<path>: <value> (<code>) <msg>". */
struct gw_conf_problem {
    enum gw_code code;
    char *path;  /* "providers[1].base_url" */
    char *value; /* the offending value as written (secrets never) */
    char *msg;   /* human text */
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
    /* Optional (NULL: not checked here): reads a file the config names
     * (providers[].ca_file, resolved) and returns NULL when it is usable, else why not
     * (in <why> or a constant), so that its problem comes with every other one of the
     * file. The caller does the I/O; core stays pure. */
    const char *(*check_ca_file)(void *arg, const char *path, char *why, size_t why_size);
    /* Optional (NULL: not checked here): reads server.tls.cert and .key (resolved) and
     * returns GW_OK when they load and match, else GW_E_CFG_TLS_CERT or
     * GW_E_CFG_TLS_KEY with why in <why>. The caller does the I/O. */
    enum gw_code (*check_tls)(void *arg, const char *cert, const char *key, char *why,
                              size_t why_size);
};

/* Parses and validates <len> bytes of YAML. <dir> is the file's folder (relative
 * paths resolve against it; NULL or "" leaves them as written). <env> may be NULL
 * (every variable then counts as unset). <probs> must be zeroed or fresh from
 * gw_conf_problems_fini; problems are appended to it.
 * On success returns GW_OK and a new config in <*out> (caller frees with
 * gw_conf_free). On refusal returns the first problem's code, sets <*out> to NULL and
 * fills <probs> with every problem found (caller frees with gw_conf_problems_fini).
 * A YAML or schema error (syntax, unknown key, wrong type) stops the load there and is
 * the only problem reported; once the YAML has loaded, every semantic problem is
 * reported. Secret values ({value: ...} keys, resolved environment values) never
 * appear in a problem. GW_E_NOMEM when out of memory (<probs> then holds nothing).
 * Any thread; never blocks; reads no file and no environment itself. */
enum gw_code gw_conf_parse(const char *yaml, size_t len, const char *dir,
                           const struct gw_conf_env *env, struct gw_conf **out,
                           struct gw_conf_problems *probs);

/* Frees <c> and everything it owns; NULL is a no-op. */
void gw_conf_free(struct gw_conf *c);
/* Frees every problem of <p>; <p> is empty and reusable afterwards. */
void gw_conf_problems_fini(struct gw_conf_problems *p);

/* Appends one problem (<value> capped as in every problem): core/conf_prices.c, and net
 * for the checks that read files (providers[].ca_file, net/egress.c). GW_E_NOMEM when
 * out of memory, <probs> then unchanged. */
enum gw_code gw_conf_problem_add(struct gw_conf_problems *probs, enum gw_code code,
                                 const char *path, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

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

/* Lookups by name in the snapshot (linear: configs are small); NULL when absent.
 * <len> bytes of <name>, which need not be NUL-terminated. */
const struct gw_conf_group *gw_conf_group_find(const struct gw_conf *c, const char *name,
                                               size_t len);
const struct gw_conf_provider *gw_conf_provider_find(const struct gw_conf *c, const char *name,
                                                     size_t len);
const struct gw_conf_client *gw_conf_client_find(const struct gw_conf *c, const char *name,
                                                 size_t len);

/* True when <cl> may use <model> (no scope, or listed). */
bool gw_conf_client_allows(const struct gw_conf_client *cl, const char *model, size_t len);

/* The spelling used in the file ("openai", "load-balance", "minute", ...); "unknown"
 * out of range. Static strings; any thread. */
const char *gw_dialect_str(enum gw_dialect d);
const char *gw_billing_str(enum gw_billing b);
const char *gw_group_type_str(enum gw_group_type t);
const char *gw_balance_by_str(enum gw_balance_by b);
const char *gw_limit_per_str(enum gw_limit_per p);

/* ---- prices and model specs (core/conf_prices.c) ---- */

/* Set for the routing engine (core/route.c): gw_conf_price_input exists. */
#define GW_CONF_HAS_PRICES 1

/* Parses and validates <len> bytes of a price table (etc/prices.yaml: a `models:` list of
 * {model, input, output, cache_read, cache_write, context_window, max_output_tokens}).
 * <probs> must be zeroed or fresh from gw_conf_problems_fini; problem paths are relative
 * to that file ("models[3].input"). Checks: model present and not blank; every model id
 * once (config.price_duplicate_model); prices finite and 0..1000000 (config.range);
 * token counts 1..100000000 when written (config.range). Empty input is an empty table.
 * On success GW_OK and a new table in <*out> (free with gw_prices_free, or hand it to
 * gw_conf_set_prices). On refusal the first problem's code, <*out> NULL and every
 * problem in <probs> (a YAML or schema error is the only one reported). GW_E_NOMEM when
 * out of memory (<probs> then empty). Any thread; never blocks; no I/O. */
enum gw_code gw_prices_parse(const char *yaml, size_t len, struct gw_prices **out,
                             struct gw_conf_problems *probs);

/* Frees <t> and its rows; NULL is a no-op. */
void gw_prices_free(struct gw_prices *t);

/* The row for <model>: the exact id, else the id without a trailing version suffix
 * ("-2025-04-14", "-20250514", "-latest"), so "gpt-4.1-2025-04-14" finds "gpt-4.1" and
 * "claude-sonnet-4-20250514" finds "claude-sonnet-4". NULL when neither is listed (or
 * <t> is NULL). The pointer lives as long as <t>. Any thread; never blocks. */
const struct gw_price *gw_prices_find(const struct gw_prices *t, const char *model);

/* Attaches the price table <*pp> to <c>, replacing (and freeing) any table it held.
 * Always takes ownership: *pp is NULL on return. <*pp> may be NULL (no table: every
 * price unknown unless model_specs gives it). Call before <c> is published (main, at
 * startup and on each reload, after gw_conf_parse and gw_prices_parse of the file at
 * c->prices_path); a published snapshot is never changed. Returns GW_OK. */
enum gw_code gw_conf_set_prices(struct gw_conf *c, struct gw_prices **pp);

/* The one resolve function of DESIGN.md 9: the prices, context window and max output of
 * <model> as served by provider <p> (NULL: the price table alone). Each field comes from
 * <p>'s model_specs entry for <model> when it gives that field, else from c->prices
 * (gw_prices_find rules; model_specs entries match the same way), else is unknown.
 * billing: free makes the four prices 0 and known. Fills <*out> completely. Any thread;
 * reads only the snapshot; never blocks. */
void gw_conf_model_spec(const struct gw_conf *c, const struct gw_conf_provider *p,
                        const char *model, struct gw_model_spec *out);

/* USD per 1M input tokens of <model> on <p> as gw_conf_model_spec resolves it: 0 for
 * billing free, < 0 when unknown. What the routing engine's cheapest order reads. */
double gw_conf_price_input(const struct gw_conf *c, const struct gw_conf_provider *p,
                           const char *model);

#endif
