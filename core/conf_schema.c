/* SPDX-License-Identifier: MIT
 * core/conf_schema.c - the libcyaml schema of the configuration file: one row per key,
 * in the order of DESIGN.md 3 and etc/gw.example.yaml; and of the price table file
 * (etc/prices.yaml, read by core/conf_prices.c).
 * Every key is optional here: what is required is checked by core/conf.c after the
 * load, so that every missing key is reported, not just the first.
 * Three places hold keys libcyaml cannot describe (mappings keyed by model id, and a
 * list whose items are a plain string or a mapping); their rows are CYAML_IGNORE and
 * core/conf.c reads them from libyaml's document tree:
 *   providers[].model_specs, providers[].quota.models, groups[].providers.
 * Owns:    constant tables only.
 * Threads: any.
 * See:     core/conf-priv.h, core/conf.c, etc/gw.example.yaml, docs/config.md
 */
#include "core/conf-priv.h"

#include <stddef.h>

#define OPT CYAML_FLAG_OPTIONAL
#define UNL CYAML_UNLIMITED

/* Strict booleans (libcyaml's CYAML_BOOL reads any unknown word as true). */
static const cyaml_strval_t bool_words[] = {
    {"true", 1}, {"false", 0}, {"yes", 1}, {"no", 0}, {"on", 1}, {"off", 0},
};

#define FIELD_BOOL(key, st, member)                                                                \
    CYAML_FIELD_ENUM_PTR(key, OPT | CYAML_FLAG_STRICT | CYAML_FLAG_CASE_INSENSITIVE, st, member,   \
                         bool_words, CYAML_ARRAY_LEN(bool_words))
#define FIELD_INT(key, st, member) CYAML_FIELD_INT_PTR(key, OPT, st, member)
#define FIELD_STR(key, st, member) CYAML_FIELD_STRING_PTR(key, OPT, st, member, 0, UNL)
#define FIELD_STRS(key, st, member)                                                                \
    CYAML_FIELD_SEQUENCE(key, OPT | CYAML_FLAG_POINTER, st, member, &string_entry, 0, UNL)

static const cyaml_schema_value_t string_entry = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, UNL),
};

/* ---- server ---- */

static const cyaml_schema_field_t tls_fields[] = {
    FIELD_STR("cert", struct gw_conf_file_tls, cert),
    FIELD_STR("key", struct gw_conf_file_tls, key),
    /* At least one: cyaml reads [] as left out, which here would mean TLS on every
     * server.listen address, the opposite of what an empty list says. */
    CYAML_FIELD_SEQUENCE("listen", OPT | CYAML_FLAG_POINTER, struct gw_conf_file_tls, listen,
                         &string_entry, 1, UNL),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t server_fields[] = {
    FIELD_STRS("listen", struct gw_conf_file_server, listen),
    FIELD_INT("workers", struct gw_conf_file_server, workers),
    CYAML_FIELD_MAPPING_PTR("tls", OPT, struct gw_conf_file_server, tls, tls_fields),
    FIELD_INT("max_body_mb", struct gw_conf_file_server, max_body_mb),
    FIELD_INT("max_header_kb", struct gw_conf_file_server, max_header_kb),
    FIELD_INT("max_headers", struct gw_conf_file_server, max_headers),
    FIELD_INT("header_timeout_secs", struct gw_conf_file_server, header_timeout_secs),
    FIELD_INT("idle_timeout_secs", struct gw_conf_file_server, idle_timeout_secs),
    FIELD_INT("body_timeout_secs", struct gw_conf_file_server, body_timeout_secs),
    FIELD_INT("max_buffered_body_mb", struct gw_conf_file_server, max_buffered_body_mb),
    FIELD_INT("max_connections", struct gw_conf_file_server, max_connections),
    FIELD_INT("drain_secs", struct gw_conf_file_server, drain_secs),
    CYAML_FIELD_END,
};

/* ---- control, log, store, retention ---- */

static const cyaml_schema_field_t control_fields[] = {
    FIELD_STR("listen", struct gw_conf_file_control, listen),
    FIELD_STR("token_env", struct gw_conf_file_control, token_env),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t log_fields[] = {
    FIELD_STR("format", struct gw_conf_file_log, format),
    FIELD_STR("level", struct gw_conf_file_log, level),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t store_fields[] = {
    FIELD_STR("path", struct gw_conf_file_store, path),
    FIELD_INT("map_size_mb", struct gw_conf_file_store, map_size_mb),
    FIELD_BOOL("responses", struct gw_conf_file_store, responses),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t retention_fields[] = {
    FIELD_INT("row_days", struct gw_conf_file_retention, row_days),
    CYAML_FIELD_END,
};

/* ---- failover ---- */

static const cyaml_schema_field_t failover_fields[] = {
    FIELD_INT("failures_to_pause", struct gw_conf_file_failover, failures_to_pause),
    FIELD_INT("pause_secs", struct gw_conf_file_failover, pause_secs),
    FIELD_INT("max_pause_secs", struct gw_conf_file_failover, max_pause_secs),
    FIELD_INT("stream_start_wait_secs", struct gw_conf_file_failover, stream_start_wait_secs),
    FIELD_BOOL("next_on_slow_start", struct gw_conf_file_failover, next_on_slow_start),
    FIELD_INT("slot_wait_secs", struct gw_conf_file_failover, slot_wait_secs),
    FIELD_INT("connect_timeout_ms", struct gw_conf_file_failover, connect_timeout_ms),
    FIELD_INT("first_byte_timeout_secs", struct gw_conf_file_failover, first_byte_timeout_secs),
    FIELD_INT("read_idle_timeout_secs", struct gw_conf_file_failover, read_idle_timeout_secs),
    CYAML_FIELD_END,
};

/* ---- providers ---- */

static const cyaml_schema_field_t key_fields[] = {
    FIELD_STR("env", struct gw_conf_file_key, env),
    FIELD_STR("value", struct gw_conf_file_key, value),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t key_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_conf_file_key, key_fields),
};

static const cyaml_schema_field_t aws_fields[] = {
    FIELD_STR("region", struct gw_conf_file_aws, region),
    CYAML_FIELD_MAPPING_PTR("access_key_id", OPT, struct gw_conf_file_aws, access_key_id,
                            key_fields),
    CYAML_FIELD_MAPPING_PTR("secret_access_key", OPT, struct gw_conf_file_aws, secret_access_key,
                            key_fields),
    CYAML_FIELD_MAPPING_PTR("session_token", OPT, struct gw_conf_file_aws, session_token,
                            key_fields),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t min_speed_fields[] = {
    FIELD_INT("tokens_per_sec", struct gw_conf_file_min_speed, tokens_per_sec),
    FIELD_INT("window_secs", struct gw_conf_file_min_speed, window_secs),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t proxy_auth_fields[] = {
    FIELD_STR("env", struct gw_conf_file_proxy_auth, env),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t quota_win_fields[] = {
    FIELD_INT("rpm", struct gw_conf_file_quota_win, rpm),
    FIELD_INT("tpm", struct gw_conf_file_quota_win, tpm),
    FIELD_INT("rpd", struct gw_conf_file_quota_win, rpd),
    FIELD_INT("tpd", struct gw_conf_file_quota_win, tpd),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t quota_fields[] = {
    CYAML_FIELD_MAPPING_PTR("default", OPT, struct gw_conf_file_quota, dflt, quota_win_fields),
    CYAML_FIELD_IGNORE("models", OPT), /* keyed by model id: read from the tree */
    FIELD_STR("pool", struct gw_conf_file_quota, pool),
    FIELD_INT("local_cooldown_cap_secs", struct gw_conf_file_quota, local_cooldown_cap_secs),
    FIELD_BOOL("probes", struct gw_conf_file_quota, probes),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t provider_fields[] = {
    FIELD_STR("name", struct gw_conf_file_provider, name),
    FIELD_STR("dialect", struct gw_conf_file_provider, dialect),
    FIELD_STR("base_url", struct gw_conf_file_provider, base_url),
    CYAML_FIELD_SEQUENCE("keys", OPT | CYAML_FLAG_POINTER, struct gw_conf_file_provider, keys,
                         &key_entry, 0, UNL),
    FIELD_STRS("models", struct gw_conf_file_provider, models),
    FIELD_BOOL("enabled", struct gw_conf_file_provider, enabled),
    FIELD_INT("max_concurrent", struct gw_conf_file_provider, max_concurrent),
    CYAML_FIELD_MAPPING_PTR("min_speed", OPT, struct gw_conf_file_provider, min_speed,
                            min_speed_fields),
    CYAML_FIELD_IGNORE("model_specs", OPT), /* keyed by model id: read from the tree */
    FIELD_STR("billing", struct gw_conf_file_provider, billing),
    CYAML_FIELD_MAPPING_PTR("quota", OPT, struct gw_conf_file_provider, quota, quota_fields),
    FIELD_STR("proxy", struct gw_conf_file_provider, proxy),
    CYAML_FIELD_MAPPING_PTR("proxy_auth", OPT, struct gw_conf_file_provider, proxy_auth,
                            proxy_auth_fields),
    FIELD_STR("ca_file", struct gw_conf_file_provider, ca_file),
    CYAML_FIELD_MAPPING_PTR("aws", OPT, struct gw_conf_file_provider, aws, aws_fields),
    FIELD_STR("http2", struct gw_conf_file_provider, http2),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t provider_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_conf_file_provider, provider_fields),
};

/* ---- groups ---- */

static const cyaml_schema_field_t group_fields[] = {
    FIELD_STR("name", struct gw_conf_file_group, name),
    FIELD_STR("type", struct gw_conf_file_group, type),
    FIELD_STR("model", struct gw_conf_file_group, model),
    CYAML_FIELD_IGNORE("providers", OPT), /* plain name or mapping: read from the tree */
    FIELD_STR("balance_by", struct gw_conf_file_group, balance_by),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t group_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_conf_file_group, group_fields),
};

/* ---- clients ---- */

static const cyaml_schema_field_t limit_fields[] = {
    FIELD_STR("per", struct gw_conf_file_limit, per),
    FIELD_INT("requests", struct gw_conf_file_limit, requests),
    FIELD_INT("tokens", struct gw_conf_file_limit, tokens),
    CYAML_FIELD_FLOAT_PTR("cost", OPT, struct gw_conf_file_limit, cost),
    FIELD_BOOL("cache_reads", struct gw_conf_file_limit, cache_reads),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t limit_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_conf_file_limit, limit_fields),
};

static const cyaml_schema_field_t client_fields[] = {
    FIELD_STR("name", struct gw_conf_file_client, name),
    FIELD_STR("key_sha256", struct gw_conf_file_client, key_sha256),
    FIELD_STR("key_env", struct gw_conf_file_client, key_env),
    FIELD_INT("max_concurrent", struct gw_conf_file_client, max_concurrent),
    FIELD_STRS("models", struct gw_conf_file_client, models),
    CYAML_FIELD_SEQUENCE("limits", OPT | CYAML_FLAG_POINTER, struct gw_conf_file_client, limits,
                         &limit_entry, 0, UNL),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t client_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_conf_file_client, client_fields),
};

/* ---- the file ---- */

static const cyaml_schema_field_t file_fields[] = {
    CYAML_FIELD_MAPPING_PTR("server", OPT, struct gw_conf_file, server, server_fields),
    CYAML_FIELD_MAPPING_PTR("control", OPT, struct gw_conf_file, control, control_fields),
    CYAML_FIELD_MAPPING_PTR("log", OPT, struct gw_conf_file, log, log_fields),
    CYAML_FIELD_MAPPING_PTR("store", OPT, struct gw_conf_file, store, store_fields),
    CYAML_FIELD_MAPPING_PTR("retention", OPT, struct gw_conf_file, retention, retention_fields),
    FIELD_STR("prices", struct gw_conf_file, prices),
    CYAML_FIELD_MAPPING_PTR("failover", OPT, struct gw_conf_file, failover, failover_fields),
    CYAML_FIELD_SEQUENCE("providers", OPT | CYAML_FLAG_POINTER, struct gw_conf_file, providers,
                         &provider_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE("groups", OPT | CYAML_FLAG_POINTER, struct gw_conf_file, groups,
                         &group_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE("clients", OPT | CYAML_FLAG_POINTER, struct gw_conf_file, clients,
                         &client_entry, 0, UNL),
    CYAML_FIELD_END,
};

const cyaml_schema_value_t gw_conf_file_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct gw_conf_file, file_fields),
};

/* ---- the price table (etc/prices.yaml) ---- */

static const cyaml_schema_field_t price_fields[] = {
    FIELD_STR("model", struct gw_prices_file_entry, model),
    CYAML_FIELD_FLOAT_PTR("input", OPT, struct gw_prices_file_entry, input),
    CYAML_FIELD_FLOAT_PTR("output", OPT, struct gw_prices_file_entry, output),
    CYAML_FIELD_FLOAT_PTR("cache_read", OPT, struct gw_prices_file_entry, cache_read),
    CYAML_FIELD_FLOAT_PTR("cache_write", OPT, struct gw_prices_file_entry, cache_write),
    FIELD_INT("context_window", struct gw_prices_file_entry, context_window),
    FIELD_INT("max_output_tokens", struct gw_prices_file_entry, max_output_tokens),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t price_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct gw_prices_file_entry, price_fields),
};

static const cyaml_schema_field_t prices_file_fields[] = {
    CYAML_FIELD_SEQUENCE("models", OPT | CYAML_FLAG_POINTER, struct gw_prices_file, models,
                         &price_entry, 0, UNL),
    CYAML_FIELD_END,
};

const cyaml_schema_value_t gw_prices_file_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct gw_prices_file, prices_file_fields),
};
