/* SPDX-License-Identifier: MIT
 * core/conf-priv.h - the file model of the configuration: the structs libcyaml fills
 * from the YAML (one member per key, pointers so that "not written" is NULL), the
 * schema that describes them, and the defaults; the same for the price table file, and
 * the loader helpers core/conf_prices.c shares. Shared by core/conf.c,
 * core/conf_schema.c, core/conf_prices.c and their unit tests only.
 * Owns:    a struct gw_conf_file is owned by libcyaml (freed with cyaml_free).
 * Threads: any; the schema is a constant table.
 * See:     core/conf.h, core/conf.c, core/conf_schema.c
 */
#ifndef GW_CORE_CONF_PRIV_H
#define GW_CORE_CONF_PRIV_H

#include <stdint.h>

#include <cyaml/cyaml.h>

#include "core/conf.h"

/* Every scalar is a pointer: NULL = not written, so defaults apply. Integers are read
 * as int64_t so that a negative or huge value reaches range checks (config.range)
 * instead of failing as a wrong type. Booleans are strict enums (true/false/yes/no/
 * on/off) because libcyaml's own bool reads any other word as true. */

struct gw_conf_file_tls {
    char *cert;
    char *key;
    char **listen;
    unsigned listen_count;
};

struct gw_conf_file_server {
    char **listen;
    unsigned listen_count;
    int64_t *workers;
    struct gw_conf_file_tls *tls;
    int64_t *max_body_mb;
    int64_t *max_header_kb;
    int64_t *max_headers;
    int64_t *header_timeout_secs;
    int64_t *idle_timeout_secs;
    int64_t *body_timeout_secs;
    int64_t *max_buffered_body_mb;
    int64_t *max_connections;
    int64_t *drain_secs;
};

struct gw_conf_file_control {
    char *listen;
    char *token_env;
};

struct gw_conf_file_log {
    char *format;
    char *level;
};

struct gw_conf_file_store {
    char *path;
    int64_t *map_size_mb;
    int *responses;
};

struct gw_conf_file_retention {
    int64_t *row_days;
};

struct gw_conf_file_failover {
    int64_t *failures_to_pause;
    int64_t *pause_secs;
    int64_t *max_pause_secs;
    int64_t *stream_start_wait_secs;
    int *next_on_slow_start;
    int64_t *slot_wait_secs;
    int64_t *connect_timeout_ms;
    int64_t *first_byte_timeout_secs;
    int64_t *read_idle_timeout_secs;
};

struct gw_conf_file_key {
    char *env;
    char *value;
};

/* providers[].aws (dialect bedrock): the region and the credentials that sign. */
struct gw_conf_file_aws {
    char *region;
    struct gw_conf_file_key *access_key_id;
    struct gw_conf_file_key *secret_access_key;
    struct gw_conf_file_key *session_token;
};

/* providers[].proxy_auth: the variable holding "user:password" (never the file). */
struct gw_conf_file_proxy_auth {
    char *env;
};

struct gw_conf_file_min_speed {
    int64_t *tokens_per_sec;
    int64_t *window_secs;
};

struct gw_conf_file_quota_win {
    int64_t *rpm;
    int64_t *tpm;
    int64_t *rpd;
    int64_t *tpd;
};

/* quota.models is keyed by model id, which libcyaml cannot express: it is ignored by
 * the schema and read by core/conf.c from libyaml's document tree. */
struct gw_conf_file_quota {
    struct gw_conf_file_quota_win *dflt; /* "default" */
    char *pool;
    int64_t *local_cooldown_cap_secs;
    int *probes;
};

/* model_specs is keyed by model id: ignored by the schema, read from the tree. */
struct gw_conf_file_provider {
    char *name;
    char *dialect;
    char *base_url;
    struct gw_conf_file_key *keys;
    unsigned keys_count;
    char **models;
    unsigned models_count;
    int *enabled;
    int64_t *max_concurrent;
    struct gw_conf_file_min_speed *min_speed;
    char *billing;
    struct gw_conf_file_quota *quota;
    char *proxy; /* a URL, or "none" / "" for no proxy at all */
    struct gw_conf_file_proxy_auth *proxy_auth;
    char *ca_file;
    struct gw_conf_file_aws *aws;
    char *http2;
};

/* providers (members) are a plain name or a mapping, which libcyaml cannot express:
 * ignored by the schema, read from the tree. */
struct gw_conf_file_group {
    char *name;
    char *type;
    char *model;
    char *balance_by;
};

struct gw_conf_file_limit {
    char *per;
    int64_t *requests;
    int64_t *tokens;
    double *cost;
    int *cache_reads;
};

struct gw_conf_file_client {
    char *name;
    char *key_sha256;
    char *key_env;
    int64_t *max_concurrent;
    char **models;
    unsigned models_count;
    struct gw_conf_file_limit *limits;
    unsigned limits_count;
};

struct gw_conf_file {
    struct gw_conf_file_server *server;
    struct gw_conf_file_control *control;
    struct gw_conf_file_log *log;
    struct gw_conf_file_store *store;
    struct gw_conf_file_retention *retention;
    char *prices;
    struct gw_conf_file_failover *failover;
    struct gw_conf_file_provider *providers;
    unsigned providers_count;
    struct gw_conf_file_group *groups;
    unsigned groups_count;
    struct gw_conf_file_client *clients;
    unsigned clients_count;
};

/* The schema of a whole file (top-level value, a pointer to struct gw_conf_file). */
extern const cyaml_schema_value_t gw_conf_file_schema;

/* ---- the price table file (etc/prices.yaml) ---- */

struct gw_prices_file_entry {
    char *model;
    double *input;
    double *output;
    double *cache_read;
    double *cache_write;
    int64_t *context_window;
    int64_t *max_output_tokens;
};

struct gw_prices_file {
    struct gw_prices_file_entry *models;
    unsigned models_count;
};

/* The schema of a price table file (a pointer to struct gw_prices_file). */
extern const cyaml_schema_value_t gw_prices_file_schema;

/* ---- helpers shared by core/conf.c and core/conf_prices.c ---- */

/* Loads <len> bytes of YAML with <schema> as gw_conf_parse does (gw allocator, aliases
 * refused). GW_OK with the data in <*out> (NULL for an empty document; free it with
 * gw_conf_cyaml_free); else the libcyaml error as one problem in <probs> (path, value,
 * code: config.syntax, unknown_field, wrong_type, duplicate_field) and its code, or
 * GW_E_NOMEM with <probs> emptied. */
enum gw_code gw_conf_cyaml_load(const char *yaml, size_t len, const cyaml_schema_value_t *schema,
                                void **out, struct gw_conf_problems *probs);
void gw_conf_cyaml_free(const cyaml_schema_value_t *schema, void *data);

/* Fills every default of <c> (DESIGN.md 3; one place for all of them): numbers, the
 * control listen address and token variable, store.path ("gw-data") and prices_path
 * ("prices.yaml"), both not yet resolved. Strings are allocated. GW_E_NOMEM on failure
 * (what was set is freed by gw_conf_free). */
enum gw_code gw_conf_defaults(struct gw_conf *c);

#endif
