/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_conf.c - the configuration loader: defaults, every check and its
 * code, problem paths and values, secrets, env resolution, lookups, and the two files
 * of etc/ (read from the repo root, where tests run).
 * Owns:    nothing beyond each test.
 * Threads: single-threaded.
 * See:     core/conf.h, core/conf.c, etc/gw.yaml, etc/gw.example.yaml
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/conf-priv.h"
#include "core/conf.h"
#include "core/log.h"
#include "core/str.h"

/* ---- fixtures ---- */

struct fake_var {
    const char *name;
    const char *value;
};

static const struct fake_var *vars;

static const char *
fake_getenv(void *arg, const char *name)
{
    const struct fake_var *v;

    (void)arg;
    for (v = vars; v && v->name; v++)
        if (strcmp(v->name, name) == 0)
            return v->value;
    return NULL;
}

/* Not SHA-256: a cheap digest that differs for the short strings the tests use. */
static void
fake_sha256(const void *data, size_t len, unsigned char out[32])
{
    const unsigned char *d = data;
    size_t i;

    memset(out, 0, 32);
    for (i = 0; i < len; i++)
        out[i % 32] ^= (unsigned char)(d[i] + i * 7 + len);
}

static const struct gw_conf_env env = {fake_getenv, fake_sha256, NULL, NULL, NULL};

static enum gw_code
parse(const char *yaml, struct gw_conf **c, struct gw_conf_problems *p)
{
    memset(p, 0, sizeof(*p));
    return gw_conf_parse(yaml, strlen(yaml), "/etc/gw", &env, c, p);
}

/* True when <p> holds a problem with <code> at <path> whose value is <value>
 * (NULL: any value). */
static bool
has_problem(const struct gw_conf_problems *p, enum gw_code code, const char *path,
            const char *value)
{
    size_t i;

    for (i = 0; i < p->n; i++)
        if (p->v[i].code == code && strcmp(p->v[i].path, path) == 0 &&
            (!value || strcmp(p->v[i].value, value) == 0))
            return true;
    return false;
}

static void
print_problems(const struct gw_conf_problems *p)
{
    char line[512];
    size_t i;

    for (i = 0; i < p->n; i++) {
        gw_conf_problem_format(&p->v[i], line, sizeof(line));
        print_message("  problem: %s\n", line);
    }
}

static char *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

#define LISTEN "server: {listen: [\"127.0.0.1:8080\"]}\n"
#define PROV_P                                                                                     \
    "  - {name: p, dialect: openai, base_url: \"http://h\", keys: [{value: v}], models: [m]}\n"
#define PROV_Q                                                                                     \
    "  - {name: q, dialect: openai, base_url: \"http://q\", keys: [{value: w}], models: [\"*\"], " \
    "model_specs: {m: {input: 1}}}\n"
#define PROVS "providers:\n" PROV_P
#define MINIMAL LISTEN PROVS
#define DIGEST_A "3a9049c62b74d338ebcabad13065aa0a5435e1efdba0176c9c17a5bfa1fac5ff"
#define DIGEST_B "72ee9d4355ccb9d3a4c9dbf37382e38e75c1b1a225b5bd1f729ee91bbda30c20"

/* ---- defaults ---- */

static void
test_conf_defaults_apply_when_keys_absent(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = NULL;
    assert_int_equal(parse(MINIMAL, &c, &p), GW_OK);
    assert_non_null(c);
    assert_int_equal(p.n, 0);
    assert_int_equal(c->server.n_listen, 1);
    assert_string_equal(c->server.listen[0].host, "127.0.0.1");
    assert_int_equal(c->server.listen[0].port, 8080);
    assert_int_equal(c->server.workers, 0);
    assert_int_equal(c->server.max_body_mb, 32);
    assert_int_equal(c->server.max_header_kb, 64);
    assert_int_equal(c->server.max_headers, 100);
    assert_int_equal(c->server.header_timeout_secs, 10);
    assert_int_equal(c->server.idle_timeout_secs, 60);
    assert_int_equal(c->server.body_timeout_secs, 60);
    assert_int_equal(c->server.max_buffered_body_mb, 256);
    assert_int_equal(c->server.max_connections, 0);
    assert_int_equal(c->server.drain_secs, 30);
    assert_null(c->server.tls_cert);
    assert_null(c->server.tls_key);
    assert_string_equal(c->control.listen.host, "127.0.0.1");
    assert_int_equal(c->control.listen.port, 8081);
    assert_string_equal(c->control.token_env, "GW_CONTROL_TOKEN");
    assert_null(c->control.token);
    assert_string_equal(c->store.path, "/etc/gw/gw-data");
    assert_int_equal(c->store.map_size_mb, 4096);
    assert_true(c->store.responses);
    assert_int_equal(c->retention.row_days, 31);
    /* prices absent: the default file next to the config, marked not explicit */
    assert_string_equal(c->prices_path, "/etc/gw/prices.yaml");
    assert_false(c->prices_explicit);
    assert_null(c->prices);
    assert_int_equal(c->failover.failures_to_pause, 3);
    assert_int_equal(c->failover.pause_secs, 60);
    assert_int_equal(c->failover.max_pause_secs, 600);
    assert_int_equal(c->failover.stream_start_wait_secs, 15);
    assert_false(c->failover.next_on_slow_start);
    assert_int_equal(c->failover.slot_wait_secs, 30);
    assert_int_equal(c->failover.connect_timeout_ms, 10000);
    assert_int_equal(c->failover.first_byte_timeout_secs, 300);
    assert_int_equal(c->failover.read_idle_timeout_secs, 300);
    assert_int_equal(c->n_providers, 1);
    assert_true(c->providers[0].enabled);
    assert_int_equal(c->providers[0].max_concurrent, 0);
    assert_int_equal(c->providers[0].billing, GW_BILLING_METERED);
    assert_int_equal(c->providers[0].http2, GW_HTTP2_AUTO);
    assert_int_equal(c->providers[0].min_speed_tps, 0);
    assert_false(c->providers[0].has_quota);
    assert_int_equal(c->providers[0].quota_local_cap_secs, 5);
    assert_true(c->providers[0].quota_probes);
    assert_int_equal(c->n_clients, 0);
    assert_int_equal(c->n_groups, 0);
    assert_string_equal(c->dir, "/etc/gw");
    gw_conf_free(c);
}

static void
test_conf_written_values_replace_defaults(void **state)
{
    static const char yaml[] =
        "server:\n"
        "  listen: [\"0.0.0.0:80\", \"[::1]:8443\", \"gw.local:9\"]\n"
        "  workers: 256\n"
        "  tls: {cert: tls/c.pem, key: /abs/k.pem}\n"
        "  max_body_mb: 1024\n"
        "  max_header_kb: 8\n"
        "  max_headers: 50\n"
        "  header_timeout_secs: 5\n"
        "  idle_timeout_secs: 7\n"
        "  drain_secs: 0\n"
        "control: {listen: \"[::1]:9000\", token_env: MY_TOKEN}\n"
        "store: {path: /var/lib/gw, map_size_mb: 16, responses: false}\n"
        "retention: {row_days: 3650}\n"
        "prices: prices.yaml\n"
        "failover: {failures_to_pause: 100, pause_secs: 5, max_pause_secs: 5,\n"
        "  stream_start_wait_secs: 5, next_on_slow_start: true, slot_wait_secs: 0,\n"
        "  connect_timeout_ms: 250, first_byte_timeout_secs: 9, read_idle_timeout_secs: 8}\n" PROVS;
    static const struct fake_var v[] = {{"MY_TOKEN", "tok-123"}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_int_equal(c->server.n_listen, 3);
    assert_string_equal(c->server.listen[0].host, "0.0.0.0");
    assert_int_equal(c->server.listen[0].port, 80);
    assert_string_equal(c->server.listen[1].host, "::1");
    assert_int_equal(c->server.listen[1].port, 8443);
    assert_string_equal(c->server.listen[2].host, "gw.local");
    assert_int_equal(c->server.workers, 256);
    assert_string_equal(c->server.tls_cert, "/etc/gw/tls/c.pem");
    assert_string_equal(c->server.tls_key, "/abs/k.pem");
    assert_true(c->server.tls_on_listen); /* no tls.listen: TLS on server.listen */
    assert_int_equal(c->server.n_tls_listen, 0);
    assert_null(c->server.tls_ctx); /* net sets it */
    assert_int_equal(c->server.max_body_mb, 1024);
    assert_int_equal(c->server.max_header_kb, 8);
    assert_int_equal(c->server.max_headers, 50);
    assert_int_equal(c->server.header_timeout_secs, 5);
    assert_int_equal(c->server.idle_timeout_secs, 7);
    assert_int_equal(c->server.drain_secs, 0);
    assert_string_equal(c->control.listen.host, "::1");
    assert_int_equal(c->control.listen.port, 9000);
    assert_string_equal(c->control.token_env, "MY_TOKEN");
    assert_string_equal(c->control.token, "tok-123");
    assert_string_equal(c->store.path, "/var/lib/gw");
    assert_int_equal(c->store.map_size_mb, 16);
    assert_false(c->store.responses);
    assert_int_equal(c->retention.row_days, 3650);
    assert_string_equal(c->prices_path, "/etc/gw/prices.yaml");
    assert_true(c->prices_explicit);
    assert_int_equal(c->failover.failures_to_pause, 100);
    assert_int_equal(c->failover.pause_secs, 5);
    assert_int_equal(c->failover.max_pause_secs, 5);
    assert_int_equal(c->failover.stream_start_wait_secs, 5);
    assert_true(c->failover.next_on_slow_start);
    assert_int_equal(c->failover.slot_wait_secs, 0);
    assert_int_equal(c->failover.connect_timeout_ms, 250);
    assert_int_equal(c->failover.first_byte_timeout_secs, 9);
    assert_int_equal(c->failover.read_idle_timeout_secs, 8);
    gw_conf_free(c);
}

static void
test_conf_control_token_unset_is_null_not_an_error(void **state)
{
    static const struct fake_var v[] = {{"GW_CONTROL_TOKEN", ""}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(MINIMAL, &c, &p), GW_OK);
    assert_null(c->control.token);
    gw_conf_free(c);
}

static void
test_conf_listen_port_zero_means_any_free_port(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = NULL;
    assert_int_equal(
        parse("server: {listen: [\"127.0.0.1:0\"]}\ncontrol: {listen: \"[::1]:0\"}\n" PROVS, &c,
              &p),
        GW_OK);
    assert_int_equal(c->server.listen[0].port, 0);
    assert_string_equal(c->control.listen.host, "::1");
    assert_int_equal(c->control.listen.port, 0);
    gw_conf_free(c);
    /* an upstream URL never has port 0 */
    assert_int_not_equal(
        parse(LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h:0\", keys: "
                     "[{value: v}], models: [m]}\n",
              &c, &p),
        GW_OK);
    assert_true(has_problem(&p, GW_E_CFG_BAD_URL, "providers[0] (p).base_url", "http://h:0"));
    gw_conf_problems_fini(&p);
}

/* log: text at info unless written; json and every level by name; other words refused,
 * both at once. */
static void
test_conf_log_format_and_level(void **state)
{
    struct gw_conf_problems p = {0};
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(MINIMAL, &c, &p), GW_OK);
    assert_int_equal(c->log.format, GW_LOG_TEXT);
    assert_int_equal(c->log.level, GW_LOG_INFO);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "log: {format: json, level: debug}\n", &c, &p), GW_OK);
    assert_int_equal(c->log.format, GW_LOG_JSON);
    assert_int_equal(c->log.level, GW_LOG_DEBUG);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "log: {level: error}\n", &c, &p), GW_OK);
    assert_int_equal(c->log.format, GW_LOG_TEXT);
    assert_int_equal(c->log.level, GW_LOG_ERROR);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "log: {format: xml, level: loud}\n", &c, &p),
                     GW_E_CFG_BAD_VALUE);
    assert_true(has_problem(&p, GW_E_CFG_BAD_VALUE, "log.format", "xml"));
    assert_true(has_problem(&p, GW_E_CFG_BAD_VALUE, "log.level", "loud"));
    gw_conf_problems_fini(&p);
}

/* store.responses: kept unless switched off, with the strict boolean words. */
/* ---- dialect bedrock: aws instead of keys ---- */

static void
test_conf_bedrock_takes_aws_credentials_and_a_default_endpoint(void **state)
{
    static const struct fake_var v[] = {
        {"AK", "AKIDEXAMPLE"}, {"SK", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(LISTEN "providers:\n"
                                  "  - {name: br, dialect: bedrock, aws: {region: eu-west-3, "
                                  "access_key_id: {env: AK}, secret_access_key: {env: SK}}, "
                                  "models: [\"anthropic.claude-3-haiku-20240307-v1:0\"]}\n"
                                  "  - {name: local, dialect: bedrock, base_url: "
                                  "\"http://127.0.0.1:9100\", aws: {region: us-east-1, "
                                  "access_key_id: {value: AK2}, secret_access_key: {value: S2}, "
                                  "session_token: {value: T2}}, models: [\"*\"]}\n",
                           &c, &p),
                     GW_OK);
    assert_int_equal(c->providers[0].dialect, GW_DIALECT_BEDROCK);
    assert_string_equal(gw_dialect_str(c->providers[0].dialect), "bedrock");
    assert_string_equal(c->providers[0].aws_region, "eu-west-3");
    assert_string_equal(c->providers[0].host, "bedrock-runtime.eu-west-3.amazonaws.com");
    assert_true(c->providers[0].tls);
    assert_int_equal(c->providers[0].port, 443);
    assert_string_equal(c->providers[0].aws_key_id.secret, "AKIDEXAMPLE");
    assert_string_equal(c->providers[0].aws_key_id.env, "AK");
    assert_string_equal(c->providers[0].aws_secret.secret, v[1].value);
    assert_null(c->providers[0].aws_token.secret);
    /* one credential for quotas and rows: the secret access key */
    assert_int_equal(c->providers[0].n_keys, 1);
    assert_string_equal(c->providers[0].keys[0].secret, v[1].value);
    /* base_url kept when written; the request is still signed for the region */
    assert_string_equal(c->providers[1].host, "127.0.0.1");
    assert_int_equal(c->providers[1].port, 9100);
    assert_string_equal(c->providers[1].aws_region, "us-east-1");
    assert_string_equal(c->providers[1].aws_token.secret, "T2");
    gw_conf_free(c);
}

static void
test_conf_bedrock_problems_are_named(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;
    char line[512];
    size_t i;

    (void)state;
    vars = NULL;
    assert_int_not_equal(
        parse(LISTEN "providers:\n"
                     "  - {name: a, dialect: bedrock, models: [m]}\n"
                     "  - {name: b, dialect: bedrock, keys: [{value: k}], models: [m]}\n"
                     "  - {name: c, dialect: bedrock, aws: {region: \"US East\", access_key_id: "
                     "{value: AK}, secret_access_key: {value: hunter2}}, models: [m]}\n"
                     "  - {name: d, dialect: bedrock, aws: {region: us-east-1, access_key_id: "
                     "{value: AK}}, models: [m]}\n"
                     "  - {name: e, dialect: openai, base_url: \"http://e\", keys: [{value: k}], "
                     "aws: {region: us-east-1}, models: [m]}\n"
                     "  - {name: f, dialect: bedrock, aws: {region: us-east-1, access_key_id: "
                     "{env: UNSET_AK}, secret_access_key: {value: \"\"}}, models: [m]}\n",
              &c, &p),
        GW_OK);
    print_problems(&p);
    assert_true(has_problem(&p, GW_E_CFG_AWS, "providers[0] (a).aws", "(none)"));
    assert_true(has_problem(&p, GW_E_CFG_AWS, "providers[1] (b).keys", NULL));
    assert_true(has_problem(&p, GW_E_CFG_AWS, "providers[2] (c).aws.region", "US East"));
    assert_true(has_problem(&p, GW_E_CFG_AWS, "providers[3] (d).aws.secret_access_key", "(none)"));
    assert_true(has_problem(&p, GW_E_CFG_AWS, "providers[4] (e).aws", NULL));
    assert_true(
        has_problem(&p, GW_E_CFG_ENV_UNSET, "providers[5] (f).aws.access_key_id.env", "UNSET_AK"));
    assert_true(
        has_problem(&p, GW_E_CFG_KEY_SOURCE, "providers[5] (f).aws.secret_access_key.value", NULL));
    for (i = 0; i < p.n; i++) { /* the secret is never echoed */
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
        assert_null(strstr(line, "hunter2"));
    }
    gw_conf_problems_fini(&p);
}

/* ---- egress: providers[].proxy, proxy_auth, ca_file, the environment's proxy ---- */

#define EGRESS_PROVS(extra_a)                                                                      \
    LISTEN "providers:\n"                                                                          \
           "  - {name: a, dialect: openai, base_url: \"https://api.example.com\", keys: [{value: " \
           "k}], models: [\"*\"]" extra_a "}\n"                                                    \
           "  - {name: b, dialect: openai, base_url: \"http://10.1.2.3:9000\", keys: [{value: "    \
           "k}], models: [\"*\"]}\n"                                                               \
           "  - {name: c, dialect: openai, base_url: \"https://internal.corp.example\", keys: "    \
           "[{value: k}], models: [\"*\"]}\n"

static void
test_conf_proxy_from_file_with_auth_from_env(void **state)
{
    static const struct fake_var v[] = {{"PROXY_CRED", "alice:s3cret"}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(EGRESS_PROVS(", proxy: \"http://proxy.corp:3128\", proxy_auth: {env: "
                                        "PROXY_CRED}, ca_file: corp-ca.pem"),
                           &c, &p),
                     GW_OK);
    assert_string_equal(c->providers[0].proxy_host, "proxy.corp");
    assert_int_equal(c->providers[0].proxy_port, 3128);
    assert_string_equal(c->providers[0].proxy_auth, "alice:s3cret");
    assert_string_equal(c->providers[0].proxy_from, "proxy");
    assert_string_equal(c->providers[0].ca_file, "/etc/gw/corp-ca.pem"); /* next to the file */
    assert_null(c->providers[0].tls_ctx);                                /* net sets it */
    assert_null(c->providers[1].proxy_host); /* no environment proxy: direct */
    assert_null(c->providers[1].ca_file);
    gw_conf_free(c);
}

static void
test_conf_environment_proxy_per_scheme_and_no_proxy(void **state)
{
    static const struct fake_var v[] = {
        {"HTTPS_PROXY", "http://u%40corp:p%3Aw@egress.corp:8080"},
        {"http_proxy", "plain.corp:3128"},
        {"HTTP_PROXY", "http://ignored.corp:1"}, /* lower case wins, as in curl */
        {"NO_PROXY", ".corp.example, 127.0.0.1"},
        {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(EGRESS_PROVS(""), &c, &p), GW_OK);
    /* https upstream: HTTPS_PROXY, with its userinfo decoded as the credential */
    assert_string_equal(c->providers[0].proxy_host, "egress.corp");
    assert_int_equal(c->providers[0].proxy_port, 8080);
    assert_string_equal(c->providers[0].proxy_auth, "u@corp:p:w");
    assert_string_equal(c->providers[0].proxy_from, "HTTPS_PROXY");
    /* http upstream: http_proxy, scheme-less */
    assert_string_equal(c->providers[1].proxy_host, "plain.corp");
    assert_int_equal(c->providers[1].proxy_port, 3128);
    assert_null(c->providers[1].proxy_auth);
    assert_string_equal(c->providers[1].proxy_from, "http_proxy");
    /* exempt by NO_PROXY */
    assert_null(c->providers[2].proxy_host);
    gw_conf_free(c);

    /* proxy: none turns the environment's proxy off for one provider */
    assert_int_equal(parse(EGRESS_PROVS(", proxy: none"), &c, &p), GW_OK);
    assert_null(c->providers[0].proxy_host);
    assert_null(c->providers[0].proxy_auth);
    assert_non_null(c->providers[1].proxy_host);
    gw_conf_free(c);
    assert_int_equal(parse(EGRESS_PROVS(", proxy: \"\""), &c, &p), GW_OK);
    assert_null(c->providers[0].proxy_host);
    gw_conf_free(c);
}

static void
test_conf_proxy_problems_are_named_and_hide_secrets(void **state)
{
    static const struct fake_var v[] = {{"NOCOLON", "justauser"},
                                        {"https_proxy", "socks5://bob:hunter2@s.corp:1080"},
                                        {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;
    char line[512];
    size_t i;

    (void)state;
    vars = v;
    /* userinfo in the file, a bad variable; provider c gets the unusable environment URL */
    assert_int_not_equal(
        parse(EGRESS_PROVS(", proxy: \"http://alice:pw@proxy.corp:3128\", proxy_auth: {env: "
                           "NOCOLON}"),
              &c, &p),
        GW_OK);
    print_problems(&p);
    assert_true(has_problem(&p, GW_E_CFG_PROXY, "providers[0] (a).proxy",
                            "http://(hidden)@proxy.corp:3128"));
    assert_true(has_problem(&p, GW_E_CFG_PROXY, "providers[0] (a).proxy_auth.env", "NOCOLON"));
    assert_true(
        has_problem(&p, GW_E_CFG_PROXY, "providers[2] (c).proxy", "socks5://(hidden)@s.corp:1080"));
    for (i = 0; i < p.n; i++) {
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
        assert_null(strstr(line, "hunter2"));
        assert_null(strstr(line, ":pw@"));
        assert_null(strstr(line, "justauser"));
    }
    gw_conf_problems_fini(&p);

    vars = NULL;
    assert_int_not_equal(parse(EGRESS_PROVS(", proxy: none, proxy_auth: {env: X}, ca_file: "
                                            "\"\"") "  - {name: d, dialect: openai, base_url: "
                                                    "\"http://d\", keys: [{value: k}], models: "
                                                    "[m], ca_file: ca.pem, proxy: "
                                                    "\"https://p:1\", proxy_auth: {env: "
                                                    "UNSET_VAR}}\n",
                               &c, &p),
                         GW_OK);
    print_problems(&p);
    assert_true(has_problem(&p, GW_E_CFG_PROXY, "providers[0] (a).proxy_auth", "(hidden)"));
    assert_true(has_problem(&p, GW_E_CFG_BAD_VALUE, "providers[0] (a).ca_file", ""));
    assert_true(has_problem(&p, GW_E_CFG_CA_FILE, "providers[3] (d).ca_file", "ca.pem"));
    assert_true(has_problem(&p, GW_E_CFG_PROXY, "providers[3] (d).proxy", "https://p:1"));
    assert_true(
        has_problem(&p, GW_E_CFG_ENV_UNSET, "providers[3] (d).proxy_auth.env", "UNSET_VAR"));
    gw_conf_problems_fini(&p);

    /* proxy_auth takes a variable only, never the secret itself */
    assert_int_not_equal(parse(EGRESS_PROVS(", proxy_auth: {value: \"u:p\"}"), &c, &p), GW_OK);
    print_problems(&p);
    assert_true(has_problem(&p, GW_E_CFG_UNKNOWN_FIELD, "providers[0] (a).proxy_auth", "(hidden)"));
    for (i = 0; i < p.n; i++) {
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
        assert_null(strstr(line, "u:p"));
        assert_null(strstr(line, "SECRET")); /* no {value: SECRET} advice here */
    }
    gw_conf_problems_fini(&p);
}

static const char *
fake_check_ca(void *arg, const char *path, char *why, size_t size)
{
    (void)arg;
    if (strstr(path, "bad.pem")) {
        snprintf(why, size, "holds no PEM certificate");
        return why;
    }
    return NULL;
}

static void
test_conf_ca_file_is_checked_by_the_callers_reader_with_other_problems(void **state)
{
    static const struct gw_conf_env fenv = {fake_getenv, fake_sha256, NULL, fake_check_ca, NULL};
    const char *yaml = EGRESS_PROVS(", ca_file: bad.pem, max_concurrent: 0");
    struct gw_conf_problems p = {0};
    struct gw_conf *c;

    (void)state;
    vars = NULL;
    assert_int_not_equal(gw_conf_parse(yaml, strlen(yaml), "/etc/gw", &fenv, &c, &p), GW_OK);
    print_problems(&p);
    assert_true(has_problem(&p, GW_E_CFG_CA_FILE, "providers[0] (a).ca_file", "/etc/gw/bad.pem"));
    assert_true(
        has_problem(&p, GW_E_CFG_PROVIDER_CONCURRENCY, "providers[0] (a).max_concurrent", NULL));
    gw_conf_problems_fini(&p);
}

static enum gw_code
fake_check_tls(void *arg, const char *cert, const char *key, char *why, size_t size)
{
    (void)arg;
    if (strstr(cert, "bad")) {
        snprintf(why, size, "holds no PEM certificate");
        return GW_E_CFG_TLS_CERT;
    }
    if (strstr(key, "other")) {
        snprintf(why, size, "does not match");
        return GW_E_CFG_TLS_KEY;
    }
    return GW_OK;
}

static void
test_conf_tls_listen_beside_listen_and_the_pair_checked_by_the_caller(void **state)
{
    static const struct gw_conf_env fenv = {fake_getenv, fake_sha256, NULL, NULL, fake_check_tls};
    static const char ok[] = "server: {listen: [\"127.0.0.1:8080\"], tls: {cert: c.pem, key: "
                             "k.pem, listen: [\"127.0.0.1:8443\", \"[::1]:0\"]}}\n" PROVS;
    static const char both[] = "server: {listen: [\"127.0.0.1:8080\", \"h:0\"], tls: {cert: "
                               "c.pem, key: k.pem, listen: [\"127.0.0.1:8080\", \"h:0\"]}}\n" PROVS;
    static const char empty[] =
        "server: {listen: [\"h:1\"], tls: {cert: c.pem, key: k.pem, listen: []}}\n" PROVS;
    static const char badkey[] =
        "server: {listen: [\"h:1\"], tls: {cert: c.pem, key: other.pem}}\n" PROVS;
    static const char badcert[] =
        "server: {listen: [\"h:1\"], tls: {cert: bad.pem, key: k.pem}}\n" PROVS;
    struct gw_conf_problems p = {0};
    struct gw_conf *c;

    (void)state;
    vars = NULL;
    assert_int_equal(gw_conf_parse(ok, strlen(ok), "/etc/gw", &fenv, &c, &p), GW_OK);
    assert_false(c->server.tls_on_listen);
    assert_int_equal(c->server.n_listen, 1);
    assert_int_equal(c->server.n_tls_listen, 2);
    assert_string_equal(c->server.tls_listen[0].host, "127.0.0.1");
    assert_int_equal(c->server.tls_listen[0].port, 8443);
    assert_string_equal(c->server.tls_listen[1].host, "::1");
    assert_int_equal(c->server.tls_listen[1].port, 0);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);

    /* An address in both lists is refused; port 0 (any free port) is never the same. */
    assert_int_equal(gw_conf_parse(both, strlen(both), "/etc/gw", &fenv, &c, &p),
                     GW_E_CFG_BAD_LISTEN);
    print_problems(&p);
    assert_int_equal(p.n, 1);
    assert_true(has_problem(&p, GW_E_CFG_BAD_LISTEN, "server.tls.listen[0]", "127.0.0.1:8080"));
    gw_conf_problems_fini(&p);

    /* [] is not "left out" (which would make server.listen TLS) */
    assert_int_not_equal(gw_conf_parse(empty, strlen(empty), "/etc/gw", &fenv, &c, &p), GW_OK);
    print_problems(&p);
    assert_int_equal(p.n, 1);
    assert_non_null(strstr(p.v[0].path, "listen"));
    gw_conf_problems_fini(&p);

    assert_int_equal(gw_conf_parse(badkey, strlen(badkey), "/etc/gw", &fenv, &c, &p),
                     GW_E_CFG_TLS_KEY);
    assert_true(has_problem(&p, GW_E_CFG_TLS_KEY, "server.tls.key", "/etc/gw/other.pem"));
    gw_conf_problems_fini(&p);
    assert_int_equal(gw_conf_parse(badcert, strlen(badcert), "/etc/gw", &fenv, &c, &p),
                     GW_E_CFG_TLS_CERT);
    assert_true(has_problem(&p, GW_E_CFG_TLS_CERT, "server.tls.cert", "/etc/gw/bad.pem"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_store_responses_defaults_to_true_and_turns_off(void **state)
{
    struct gw_conf_problems p = {0};
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(MINIMAL "store: {path: data}\n", &c, &p), GW_OK);
    assert_true(c->store.responses);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "store: {responses: false}\n", &c, &p), GW_OK);
    assert_false(c->store.responses);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "store: {responses: off}\n", &c, &p), GW_OK);
    assert_false(c->store.responses);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "store: {responses: true}\n", &c, &p), GW_OK);
    assert_true(c->store.responses);
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    assert_int_equal(parse(MINIMAL "store: {responses: sometimes}\n", &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "store.responses", "sometimes"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_relative_paths_without_dir_stay_as_written(void **state)
{
    static const char yaml[] = MINIMAL "store: {path: data}\n";
    struct gw_conf_problems p = {0};
    struct gw_conf *c;

    (void)state;
    assert_int_equal(gw_conf_parse(yaml, strlen(yaml), NULL, NULL, &c, &p), GW_OK);
    assert_string_equal(c->store.path, "data");
    assert_string_equal(c->prices_path, "prices.yaml");
    assert_false(c->prices_explicit);
    gw_conf_free(c);
}

/* ---- one check, one code ---- */

struct bad_case {
    const char *yaml;
    enum gw_code code;
    const char *path;
    const char *value;
};

#define SRV(extra) "server: {listen: [\"127.0.0.1:8080\"], " extra "}\n" PROVS
#define FO(extra) MINIMAL "failover: {" extra "}\n"
#define PROV_WITH(extra)                                                                           \
    LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "                   \
           "keys: [{value: v}], models: [m], " extra "}\n"
#define CLIENT(body) MINIMAL "clients:\n  - {" body "}\n"

static const struct bad_case bad_cases[] = {
    {SRV("workers: 257"), GW_E_CFG_RANGE, "server.workers", "257"},
    {SRV("workers: -1"), GW_E_CFG_RANGE, "server.workers", "-1"},
    {SRV("max_body_mb: 0"), GW_E_CFG_RANGE, "server.max_body_mb", "0"},
    {SRV("max_body_mb: 1025"), GW_E_CFG_RANGE, "server.max_body_mb", "1025"},
    {SRV("max_header_kb: 0"), GW_E_CFG_RANGE, "server.max_header_kb", "0"},
    {SRV("max_headers: 0"), GW_E_CFG_RANGE, "server.max_headers", "0"},
    {SRV("header_timeout_secs: 0"), GW_E_CFG_RANGE, "server.header_timeout_secs", "0"},
    {SRV("idle_timeout_secs: 0"), GW_E_CFG_RANGE, "server.idle_timeout_secs", "0"},
    {SRV("drain_secs: 3601"), GW_E_CFG_RANGE, "server.drain_secs", "3601"},
    {SRV("body_timeout_secs: 0"), GW_E_CFG_RANGE, "server.body_timeout_secs", "0"},
    {SRV("body_timeout_secs: 3601"), GW_E_CFG_RANGE, "server.body_timeout_secs", "3601"},
    {SRV("max_connections: -1"), GW_E_CFG_RANGE, "server.max_connections", "-1"},
    {SRV("max_buffered_body_mb: 0"), GW_E_CFG_RANGE, "server.max_buffered_body_mb", "0"},
    {SRV("max_buffered_body_mb: 31"), GW_E_CFG_RANGE, "server.max_buffered_body_mb", "31"},
    {SRV("tls: {cert: c.pem}"), GW_E_CFG_MISSING_FIELD, "server.tls.key", NULL},
    {"server: {listen: []}\n" PROVS, GW_E_CFG_MISSING_FIELD, "server.listen", NULL},
    {PROVS, GW_E_CFG_MISSING_FIELD, "server.listen", NULL},
    {"server: {listen: [\"::1:80\"]}\n" PROVS, GW_E_CFG_BAD_LISTEN, "server.listen[0]", "::1:80"},
    {"server: {listen: [\"h\"]}\n" PROVS, GW_E_CFG_BAD_LISTEN, "server.listen[0]", "h"},
    {"server: {listen: [\"h:65536\"]}\n" PROVS, GW_E_CFG_BAD_LISTEN, "server.listen[0]", "h:65536"},
    {"server: {listen: [\"h:65536\"]}\n" PROVS, GW_E_CFG_BAD_LISTEN, "server.listen[0]", "h:65536"},
    {"server: {listen: [\"[h]:1\"]}\n" PROVS, GW_E_CFG_BAD_LISTEN, "server.listen[0]", "[h]:1"},
    {MINIMAL "control: {listen: \"127.0.0.1\"}\n", GW_E_CFG_BAD_LISTEN, "control.listen",
     "127.0.0.1"},
    {MINIMAL "control: {token_env: \"A-B\"}\n", GW_E_CFG_BAD_VALUE, "control.token_env",
     "(hidden)"}, /* issue 8: maybe a token pasted in */
    {MINIMAL "store: {map_size_mb: 15}\n", GW_E_CFG_RANGE, "store.map_size_mb", "15"},
    {MINIMAL "store: {map_size_mb: 1048577}\n", GW_E_CFG_RANGE, "store.map_size_mb", "1048577"},
    {MINIMAL "store: {path: \"\"}\n", GW_E_CFG_BAD_VALUE, "store.path", ""},
    {MINIMAL "retention: {row_days: 0}\n", GW_E_CFG_RANGE, "retention.row_days", "0"},
    {MINIMAL "retention: {row_days: 3651}\n", GW_E_CFG_RANGE, "retention.row_days", "3651"},
    {FO("failures_to_pause: 0"), GW_E_CFG_RANGE, "failover.failures_to_pause", "0"},
    {FO("failures_to_pause: 101"), GW_E_CFG_RANGE, "failover.failures_to_pause", "101"},
    {FO("pause_secs: 0"), GW_E_CFG_RANGE, "failover.pause_secs", "0"},
    {FO("pause_secs: 100, max_pause_secs: 99"), GW_E_CFG_RANGE, "failover.max_pause_secs", "99"},
    {FO("pause_secs: 700"), GW_E_CFG_RANGE, "failover.max_pause_secs", "600"},
    {FO("stream_start_wait_secs: 0"), GW_E_CFG_RANGE, "failover.stream_start_wait_secs", "0"},
    {FO("stream_start_wait_secs: 121"), GW_E_CFG_RANGE, "failover.stream_start_wait_secs", "121"},
    {FO("stream_start_wait_secs: 4, next_on_slow_start: true"), GW_E_CFG_SLOW_START_TOO_SHORT,
     "failover.stream_start_wait_secs", "4"},
    {FO("slot_wait_secs: 301"), GW_E_CFG_RANGE, "failover.slot_wait_secs", "301"},
    {FO("connect_timeout_ms: 0"), GW_E_CFG_RANGE, "failover.connect_timeout_ms", "0"},
    {FO("first_byte_timeout_secs: 0"), GW_E_CFG_RANGE, "failover.first_byte_timeout_secs", "0"},
    {FO("read_idle_timeout_secs: 0"), GW_E_CFG_RANGE, "failover.read_idle_timeout_secs", "0"},
    {LISTEN, GW_E_CFG_MISSING_FIELD, "providers", NULL},
    {LISTEN "providers:\n  - {dialect: openai, base_url: \"http://h\", keys: [{value: v}], "
            "models: [m]}\n",
     GW_E_CFG_MISSING_FIELD, "providers[0].name", NULL},
    {LISTEN "providers:\n  - {name: Bad, dialect: openai, base_url: \"http://h\", "
            "keys: [{value: v}], models: [m]}\n",
     GW_E_CFG_BAD_NAME, "providers[0] (Bad).name", "Bad"},
    {MINIMAL PROV_P, GW_E_CFG_DUPLICATE_NAME, "providers[1] (p).name", "p"},
    {LISTEN "providers:\n  - {name: p, dialect: grok, base_url: \"http://h\", "
            "keys: [{value: v}], models: [m]}\n",
     GW_E_CFG_BAD_DIALECT, "providers[0] (p).dialect", "grok"},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"ftp://h\", "
            "keys: [{value: v}], models: [m]}\n",
     GW_E_CFG_BAD_URL, "providers[0] (p).base_url", "ftp://h"},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"https://h:0\", "
            "keys: [{value: v}], models: [m]}\n",
     GW_E_CFG_BAD_URL, "providers[0] (p).base_url", "https://h:0"},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h/x?y=1\", "
            "keys: [{value: v}], models: [m]}\n",
     GW_E_CFG_BAD_URL, "providers[0] (p).base_url", "(hidden)"},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", keys: [], "
            "models: [m]}\n",
     GW_E_CFG_NO_KEYS, "providers[0] (p).keys", NULL},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "
            "keys: [{env: A, value: b}], models: [m]}\n",
     GW_E_CFG_KEY_SOURCE, "providers[0] (p).keys[0]", NULL},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "
            "keys: [{value: v}, {}], models: [m]}\n",
     GW_E_CFG_KEY_SOURCE, "providers[0] (p).keys[1]", NULL},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "
            "keys: [{value: v}], models: []}\n",
     GW_E_CFG_NO_MODELS, "providers[0] (p).models", NULL},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "
            "keys: [{value: v}]}\n",
     GW_E_CFG_NO_MODELS, "providers[0] (p).models", NULL},
    {PROV_WITH("max_concurrent: 0"), GW_E_CFG_PROVIDER_CONCURRENCY,
     "providers[0] (p).max_concurrent", "0"},
    {PROV_WITH("max_concurrent: 1001"), GW_E_CFG_PROVIDER_CONCURRENCY,
     "providers[0] (p).max_concurrent", "1001"},
    {PROV_WITH("min_speed: {tokens_per_sec: 0, window_secs: 20}"), GW_E_CFG_MIN_SPEED_RANGE,
     "providers[0] (p).min_speed.tokens_per_sec", "0"},
    {PROV_WITH("min_speed: {tokens_per_sec: 1001, window_secs: 20}"), GW_E_CFG_MIN_SPEED_RANGE,
     "providers[0] (p).min_speed.tokens_per_sec", "1001"},
    {PROV_WITH("min_speed: {tokens_per_sec: 10, window_secs: 4}"), GW_E_CFG_MIN_SPEED_RANGE,
     "providers[0] (p).min_speed.window_secs", "4"},
    {PROV_WITH("min_speed: {tokens_per_sec: 10, window_secs: 121}"), GW_E_CFG_MIN_SPEED_RANGE,
     "providers[0] (p).min_speed.window_secs", "121"},
    {PROV_WITH("billing: prepaid"), GW_E_CFG_BAD_VALUE, "providers[0] (p).billing", "prepaid"},
    {PROV_WITH("http2: yes"), GW_E_CFG_BAD_VALUE, "providers[0] (p).http2", "yes"},
    {PROV_WITH("quota: {pool: team}"), GW_E_CFG_BAD_VALUE, "providers[0] (p).quota.pool", "team"},
    {PROV_WITH("quota: {default: {rpm: 0}}"), GW_E_CFG_RANGE, "providers[0] (p).quota.default.rpm",
     "0"},
    {PROV_WITH("quota: {local_cooldown_cap_secs: 86401}"), GW_E_CFG_RANGE,
     "providers[0] (p).quota.local_cooldown_cap_secs", "86401"},
    {PROV_WITH("quota: {local_cooldown_cap_secs: -1}"), GW_E_CFG_RANGE,
     "providers[0] (p).quota.local_cooldown_cap_secs", "-1"},
    {PROV_WITH("quota: {pool: account, models: {m: {rpm: 1}}}"), GW_E_CFG_QUOTA_ACCOUNT_MODELS,
     "providers[0] (p).quota.models", "(pool: account)"},
    {PROV_WITH("quota: {models: {\"*\": {rpm: 1}}}"), GW_E_CFG_MODEL_SPEC_WILDCARD,
     "providers[0] (p).quota.models", "*"},
    {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", models: [m], "
            "keys: [{value: a}, {value: b}, {value: c}, {value: d}, {value: e}, {value: f}, "
            "{value: g}, {value: h}, {value: i}, {value: j}, {value: k}, {value: l}, {value: m}, "
            "{value: n}, {value: o}, {value: p}, {value: q}]}\n",
     GW_E_CFG_TOO_MANY_KEYS, "providers[0] (p).keys", "(17 keys)"},
    {PROV_WITH("model_specs: {\"\": {context_window: 1}}"), GW_E_CFG_MODEL_SPEC_BLANK_MODEL,
     "providers[0] (p).model_specs", ""},
    {PROV_WITH("model_specs: {m: {context_window: 0}}"), GW_E_CFG_MODEL_SPEC_ZERO,
     "providers[0] (p).model_specs.m.context_window", "0"},
    {PROV_WITH("model_specs: {m: {max_output_tokens: 0}}"), GW_E_CFG_MODEL_SPEC_ZERO,
     "providers[0] (p).model_specs.m.max_output_tokens", "0"},
    {PROV_WITH("model_specs: {m: {context_window: -5}}"), GW_E_CFG_RANGE,
     "providers[0] (p).model_specs.m.context_window", "-5"},
    {PROV_WITH("model_specs: {m: {}}"), GW_E_CFG_MODEL_SPEC_EMPTY, "providers[0] (p).model_specs.m",
     "{}"},
    {PROV_WITH("model_specs: {m: }"), GW_E_CFG_MODEL_SPEC_EMPTY, "providers[0] (p).model_specs.m",
     "(nothing)"},
    {PROV_WITH("model_specs: {\"*\": {context_window: 8}}"), GW_E_CFG_MODEL_SPEC_WILDCARD,
     "providers[0] (p).model_specs", "*"},
    {PROV_WITH("model_specs: {\" \": {context_window: 8}}"), GW_E_CFG_MODEL_SPEC_BLANK_MODEL,
     "providers[0] (p).model_specs", " "},
    {PROV_WITH("model_specs: {m: {input: -1}}"), GW_E_CFG_RANGE,
     "providers[0] (p).model_specs.m.input", "-1"},
    {PROV_WITH("model_specs: {m: {context: 5}}"), GW_E_CFG_UNKNOWN_FIELD,
     "providers[0] (p).model_specs.m.context", "context"},
    {CLIENT("name: a"), GW_E_CFG_KEY_SOURCE, "clients[0] (a)", NULL},
    {CLIENT("name: a, key_sha256: \"" DIGEST_A "\", key_env: K"), GW_E_CFG_KEY_SOURCE,
     "clients[0] (a)", NULL},
    {CLIENT("name: a, key_sha256: abc"), GW_E_CFG_BAD_SHA256, "clients[0] (a).key_sha256", NULL},
    {CLIENT("name: a, key_sha256: \"" DIGEST_A "\", max_concurrent: 0"), GW_E_CFG_RANGE,
     "clients[0] (a).max_concurrent", "0"},
#define LIM(l) CLIENT("name: a, key_sha256: \"" DIGEST_A "\", limits: [" l "]")
    {LIM("{per: day}"), GW_E_CFG_KEY_LIMIT_EMPTY, "clients[0] (a).limits[0]", "day"},
    {LIM("{per: day, requests: 0}"), GW_E_CFG_KEY_LIMIT_NOT_POSITIVE,
     "clients[0] (a).limits[0].requests", "0"},
    {LIM("{per: day, requests: 5}, {per: day, requests: 9}"), GW_E_CFG_KEY_LIMIT_DUPLICATE,
     "clients[0] (a).limits[1]", "day"},
    {LIM("{per: hour, requests: 5, tokens: 9}"), GW_E_CFG_KEY_LIMIT_TWO_MEASURES,
     "clients[0] (a).limits[0]", "hour"},
    {LIM("{per: day, requests: 5, cache_reads: true}"), GW_E_CFG_KEY_LIMIT_CACHE_READS,
     "clients[0] (a).limits[0].cache_reads", "true"},
    {LIM("{per: day, cost: 0.001}"), GW_E_CFG_KEY_LIMIT_COST_TOO_SMALL,
     "clients[0] (a).limits[0].cost", "0.001"},
    {"retention: {row_days: 5}\n" LIM("{per: week, requests: 5}"), GW_E_CFG_KEY_LIMIT_RETENTION,
     "retention.row_days", "5"},
    {CLIENT("name: a, key_sha256: \"" DIGEST_A "\"}\n  - {name: a, key_sha256: \"" DIGEST_B "\""),
     GW_E_CFG_DUPLICATE_NAME, "clients[1] (a).name", "a"},
    {CLIENT("name: a, key_sha256: \"" DIGEST_A "\"}\n  - {name: b, key_sha256: \"" DIGEST_A "\""),
     GW_E_CFG_DUPLICATE_KEY, "clients[1] (b).key_sha256", NULL},
    {CLIENT("name: \"a b\", key_sha256: \"" DIGEST_A "\""), GW_E_CFG_BAD_NAME,
     "clients[0] (a b).name", "a b"},
    {CLIENT("name: a, key_sha256: \"" DIGEST_A "\", limits: [{per: year, requests: 1}]"),
     GW_E_CFG_BAD_VALUE, "clients[0] (a).limits[0].per", "year"},
    {MINIMAL "groups: [{name: g, type: random, providers: [p]}]\n", GW_E_CFG_BAD_VALUE,
     "groups[0] (g).type", "random"},
    {MINIMAL "groups: [{name: g, type: load-balance, providers: [{name: p, weight: 101}]}]\n",
     GW_E_ENG_GROUP_WEIGHT_RANGE, "groups[0] (g).providers[0] (p).weight", "101"},
    {MINIMAL "groups: [{name: g, type: load-balance, providers: [{name: p, weight: 0}]}]\n",
     GW_E_ENG_GROUP_WEIGHT_RANGE, "groups[0] (g).providers[0] (p).weight", "0"},
    {MINIMAL "groups: [{name: g, providers: [{name: p, weight: 2}]}]\n",
     GW_E_ENG_GROUP_WEIGHT_NOT_LB, "groups[0] (g).providers[0] (p).weight", "2"},
    {MINIMAL "groups: [{name: g, type: cheapest, providers: [{name: p, weight: 1}]}]\n",
     GW_E_ENG_GROUP_WEIGHT_NOT_LB, "groups[0] (g).providers[0] (p).weight", "1"},
    {MINIMAL "groups: [{name: g, type: url-test, balance_by: latency, providers: [p]}]\n",
     GW_E_ENG_GROUP_BALANCE_NOT_LB, "groups[0] (g).balance_by", "latency"},
    {MINIMAL "groups: [{name: g, balance_by: weights, providers: [p]}]\n",
     GW_E_ENG_GROUP_BALANCE_NOT_LB, "groups[0] (g).balance_by", "weights"},
    {MINIMAL "groups: [{name: g, providers: [nobody]}]\n", GW_E_ENG_GROUP_UNKNOWN_MEMBER,
     "groups[0] (g).providers[0] (nobody)", "nobody"},
    {MINIMAL "groups: [{name: g, providers: [p, {name: ghost, model: x}]}]\n",
     GW_E_ENG_GROUP_UNKNOWN_MEMBER, "groups[0] (g).providers[1] (ghost).name", "ghost"},
    {MINIMAL "groups: [{name: g, providers: [p, {name: p, model: x}]}]\n",
     GW_E_ENG_GROUP_DUPLICATE_MEMBER, "groups[0] (g).providers[1] (p).name", "p"},
    {MINIMAL "groups: [{name: g, providers: [p, p]}]\n", GW_E_ENG_GROUP_DUPLICATE_MEMBER,
     "groups[0] (g).providers[1] (p)", "p"},
    {MINIMAL "groups: [{name: g, providers: []}]\n", GW_E_ENG_GROUP_EMPTY,
     "groups[0] (g).providers", "[]"},
    {MINIMAL "groups: [{name: g}]\n", GW_E_ENG_GROUP_EMPTY, "groups[0] (g).providers", "(none)"},
    {MINIMAL "groups: [{name: g, providers: [p]}, {name: g, providers: [p]}]\n",
     GW_E_ENG_GROUP_DUPLICATE_NAME, "groups[1] (g).name", "g"},
    {MINIMAL "groups: [{name: g, model: \"\", providers: [p]}]\n", GW_E_CFG_BAD_VALUE,
     "groups[0] (g).model", ""},
    {MINIMAL "groups: [{name: g, providers: [{weight: 2}]}]\n", GW_E_CFG_MISSING_FIELD,
     "groups[0] (g).providers[0].name", NULL},
};

static void
test_conf_each_bad_value_gets_its_code_path_and_value(void **state)
{
    size_t i, failed = 0;

    (void)state;
    vars = NULL;
    for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *b = &bad_cases[i];
        struct gw_conf_problems p;
        struct gw_conf *c = (struct gw_conf *)1;
        enum gw_code rc = parse(b->yaml, &c, &p);

        if (!has_problem(&p, b->code, b->path, b->value)) {
            print_message("case %zu: expected %s at %s = %s\n%s", i, gw_code_str(b->code), b->path,
                          b->value ? b->value : "*", b->yaml);
            print_problems(&p);
            failed++;
        }
        assert_int_not_equal(rc, GW_OK);
        assert_int_equal(rc, p.v[0].code);
        assert_null(c);
        gw_conf_problems_fini(&p);
    }
    assert_int_equal(failed, 0);
}

/* Issue 8: the body budget defaults to 256 MiB and follows a larger max_body_mb when it
 * is not written, so no body of the allowed size is refused for want of room. */
static void
test_conf_max_buffered_body_follows_max_body_when_absent(void **state)
{
    static const char yaml[] = "server: {listen: [\"h:1\"], max_body_mb: 512}\n" PROVS;
    static const char edges[] =
        "server: {listen: [\"h:1\"], max_body_mb: 8, max_buffered_body_mb: 8,\n"
        "         body_timeout_secs: 3600, max_connections: 1000000}\n" PROVS;
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_int_equal(c->server.max_buffered_body_mb, 512);
    gw_conf_free(c);
    assert_int_equal(parse(edges, &c, &p), GW_OK);
    assert_int_equal(c->server.max_buffered_body_mb, 8);
    assert_int_equal(c->server.body_timeout_secs, 3600);
    assert_int_equal(c->server.max_connections, 1000000);
    gw_conf_free(c);
}

static void
test_conf_range_edges_are_accepted(void **state)
{
    static const char yaml[] =
        "server: {listen: [\"h:1\", \"h:65535\"], workers: 0, max_body_mb: 1, drain_secs: 3600}\n"
        "store: {map_size_mb: 1048576}\n"
        "retention: {row_days: 1}\n"
        "failover: {failures_to_pause: 1, stream_start_wait_secs: 120, slot_wait_secs: 300}\n"
        "providers:\n"
        "  - {name: p, dialect: openai, base_url: \"http://h\", keys: [{value: v}], models: [m],\n"
        "     max_concurrent: 1000, min_speed: {tokens_per_sec: 1000, window_secs: 5}}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_int_equal(c->providers[0].max_concurrent, 1000);
    assert_int_equal(c->providers[0].min_speed_tps, 1000);
    assert_int_equal(c->providers[0].min_speed_window_secs, 5);
    gw_conf_free(c);
}

/* ---- schema errors (libcyaml) ---- */

static void
test_conf_unknown_field_names_path_and_key(void **state)
{
    static const char yaml[] = LISTEN "providers:\n"
                                      "  - {name: a, dialect: openai, base_url: \"http://h\", "
                                      "keys: [{value: v}], models: [m]}\n"
                                      "  - {name: b, colour: blue}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_E_CFG_UNKNOWN_FIELD);
    assert_null(c);
    /* the key is reported first, then the rest of the file is still checked */
    assert_int_equal(p.n, 5);
    assert_string_equal(p.v[0].path, "providers[1] (b).colour");
    assert_string_equal(p.v[0].value, "colour");
    assert_true(has_problem(&p, GW_E_CFG_MISSING_FIELD, "providers[1] (b).dialect", "(missing)"));
    gw_conf_problems_fini(&p);
}

/* Issue 12: every schema problem of a file in one run (unknown keys, wrong types, a key
 * written twice), then the checks of the rest of the file; every list entry named. */
static void
test_issue_12_every_problem_of_a_file_in_one_run_with_names(void **state)
{
    static const char yaml[] =
        "server:\n"
        "  listen: [\"127.0.0.1:8080\"]\n"
        "  workers: many-workers\n"
        "  colour: blue\n"
        "providers:\n"
        "  - name: g-alpha\n"
        "    dialect: openai\n"
        "    base_url: http://h\n"
        "    keys: [{value: v}]\n"
        "    models: [m]\n"
        "    max_concurrent: lots\n"
        "    enabled: true\n"
        "    enabled: false\n"
        "  - {name: g-beta, dialect: klingon, base_url: \"http://h\", keys: [{value: w}],\n"
        "     models: [m], min_speed: {tokens_per_sec: [1], window_secs: 10}}\n"
        "groups:\n"
        "  - name: grp-bad\n"
        "    providers: [{name: g-alpha, weight: 5}, nope]\n"
        "clients:\n"
        "  - {name: ci, key_sha256: \"" DIGEST_A "\", max_concurrent: 0, limit: 3}\n";
    static const char *const want[] = {
        "server.workers: many-workers (config.wrong_type) expected an integer (line 3)",
        "server.colour: colour (config.unknown_field) unknown key 'colour' (line 4)",
        "providers[0] (g-alpha).max_concurrent: lots (config.wrong_type) expected an integer "
        "(line 11)",
        "providers[0] (g-alpha).enabled: enabled (config.duplicate_field) key written twice "
        "(line 13)",
        "providers[1] (g-beta).min_speed.tokens_per_sec: (a list) (config.wrong_type) expected "
        "an integer (line 15)",
        "clients[0] (ci).limit: limit (config.unknown_field) unknown key 'limit' (line 20)",
        "providers[1] (g-beta).dialect: klingon (config.bad_dialect) must be one of openai, "
        "responses, anthropic, gemini, bedrock",
        "groups[0] (grp-bad).providers[0] (g-alpha).weight: 5 "
        "(engine.group_weight_not_load_balance) weights apply to load-balance groups only; "
        "remove it or set type: load-balance",
        "groups[0] (grp-bad).providers[1] (nope): nope (engine.group_unknown_member) no "
        "provider has this name",
        "clients[0] (ci).max_concurrent: 0 (config.range) must be 1..1000",
    };
    struct gw_conf_problems p;
    struct gw_conf *c;
    char line[512];
    size_t i;

    (void)state;
    vars = NULL;
    assert_int_equal(parse(yaml, &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_null(c);
    print_problems(&p);
    assert_int_equal(p.n, sizeof(want) / sizeof(want[0]));
    for (i = 0; i < p.n; i++) {
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
        assert_string_equal(line, want[i]);
    }
    gw_conf_problems_fini(&p);
}

/* A value refused for its type is not also reported as missing by the later checks. */
static void
test_issue_12_a_refused_value_is_not_also_missing(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(LISTEN "providers:\n  - {name: [p], dialect: openai, base_url: "
                                  "\"http://h\", keys: [{value: v}], models: [m]}\n",
                           &c, &p),
                     GW_E_CFG_WRONG_TYPE);
    assert_int_equal(p.n, 1);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "providers[0].name", "(a list)"));
    gw_conf_problems_fini(&p);

    /* an entry of the wrong type refuses its list: later entries keep their index */
    assert_int_equal(parse(LISTEN "providers: [7]\n", &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_int_equal(p.n, 1);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "providers[0]", "7"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_unknown_top_level_section(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(MINIMAL "cluster: {redis: x}\n", &c, &p), GW_E_CFG_UNKNOWN_FIELD);
    assert_true(has_problem(&p, GW_E_CFG_UNKNOWN_FIELD, "cluster", "cluster"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_wrong_type_names_path_and_value(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse("server: {listen: [\"h:1\"], workers: many}\n" PROVS, &c, &p),
                     GW_E_CFG_WRONG_TYPE);
    assert_int_equal(p.n, 1);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "server.workers", "many"));
    gw_conf_problems_fini(&p);

    /* a scalar where a list is expected shows the scalar */
    assert_int_equal(parse("server: {listen: \"h:1\"}\n" PROVS, &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "server.listen", "h:1"));
    gw_conf_problems_fini(&p);

    /* a list where a number is expected, inside a list */
    assert_int_equal(parse(PROV_WITH("max_concurrent: [1]"), &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_true(
        has_problem(&p, GW_E_CFG_WRONG_TYPE, "providers[0] (p).max_concurrent", "(a list)"));
    gw_conf_problems_fini(&p);

    /* an integer is the whole value: 1e3 is not read as 1 */
    assert_int_equal(parse("server: {listen: [\"h:1\"], workers: 1e3}\n" PROVS, &c, &p),
                     GW_E_CFG_WRONG_TYPE);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "server.workers", "1e3"));
    gw_conf_problems_fini(&p);

    /* booleans are strict */
    assert_int_equal(parse(PROV_WITH("enabled: maybe"), &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "providers[0] (p).enabled", "maybe"));
    gw_conf_problems_fini(&p);

    /* the document itself */
    assert_int_equal(parse("- a\n", &c, &p), GW_E_CFG_WRONG_TYPE);
    assert_true(has_problem(&p, GW_E_CFG_WRONG_TYPE, "(document)", "(a list)"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_duplicate_key_is_refused(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse("server: {listen: [\"h:1\"], workers: 1, workers: 2}\n" PROVS, &c, &p),
                     GW_E_CFG_DUPLICATE_FIELD);
    assert_true(has_problem(&p, GW_E_CFG_DUPLICATE_FIELD, "server.workers", NULL));
    gw_conf_problems_fini(&p);
}

static void
test_conf_syntax_error_gives_line_and_column(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse("server: {listen: [\"h:1\"]\nproviders: [\n", &c, &p), GW_E_CFG_SYNTAX);
    assert_int_equal(p.n, 1);
    assert_string_equal(p.v[0].path, "(document)");
    assert_non_null(strstr(p.v[0].value, "line "));
    gw_conf_problems_fini(&p);
}

static void
test_conf_alias_is_refused(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(
        parse("server: {listen: [\"h:1\"], workers: &w 2, drain_secs: *w}\n" PROVS, &c, &p),
        GW_E_CFG_SYNTAX);
    assert_true(has_problem(&p, GW_E_CFG_SYNTAX, "server.drain_secs", NULL));
    gw_conf_problems_fini(&p);
}

static void
test_conf_empty_document_reports_what_is_required(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse("", &c, &p), GW_E_CFG_MISSING_FIELD);
    assert_int_equal(p.n, 2);
    assert_true(has_problem(&p, GW_E_CFG_MISSING_FIELD, "server.listen", NULL));
    assert_true(has_problem(&p, GW_E_CFG_MISSING_FIELD, "providers", NULL));
    gw_conf_problems_fini(&p);
}

/* ---- every problem at once ---- */

static void
test_conf_reports_every_problem_at_once(void **state)
{
    static const char yaml[] = "server: {listen: [\"h:1\"], workers: 999, drain_secs: 9999}\n"
                               "retention: {row_days: 0}\n" PROVS;
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_E_CFG_RANGE);
    assert_null(c);
    assert_int_equal(p.n, 3);
    assert_true(has_problem(&p, GW_E_CFG_RANGE, "server.workers", "999"));
    assert_true(has_problem(&p, GW_E_CFG_RANGE, "server.drain_secs", "9999"));
    assert_true(has_problem(&p, GW_E_CFG_RANGE, "retention.row_days", "0"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_group_problems_are_all_reported_at_once(void **state)
{
    static const char yaml[] =
        MINIMAL PROV_Q "groups:\n"
                       "  - {name: a, type: fallback, balance_by: health,\n"
                       "     providers: [p, {name: q, weight: 3}, ghost, p]}\n"
                       "  - {name: b, type: load-balance, providers: [{name: q, weight: 0}, {name: "
                       "p, weight: 101}]}\n"
                       "  - {name: a, providers: []}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    /* the first problem found (groups[0].balance_by) gives the return code */
    assert_int_equal(parse(yaml, &c, &p), GW_E_ENG_GROUP_BALANCE_NOT_LB);
    assert_null(c);
    assert_int_equal(p.n, 8);
    assert_true(
        has_problem(&p, GW_E_ENG_GROUP_BALANCE_NOT_LB, "groups[0] (a).balance_by", "health"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_WEIGHT_NOT_LB,
                            "groups[0] (a).providers[1] (q).weight", "3"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_UNKNOWN_MEMBER, "groups[0] (a).providers[2] (ghost)",
                            "ghost"));
    assert_true(
        has_problem(&p, GW_E_ENG_GROUP_DUPLICATE_MEMBER, "groups[0] (a).providers[3] (p)", "p"));
    assert_true(
        has_problem(&p, GW_E_ENG_GROUP_WEIGHT_RANGE, "groups[1] (b).providers[0] (q).weight", "0"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_WEIGHT_RANGE,
                            "groups[1] (b).providers[1] (p).weight", "101"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_EMPTY, "groups[2] (a).providers", "[]"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_DUPLICATE_NAME, "groups[2] (a).name", "a"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_group_edges_are_accepted(void **state)
{
    static const char yaml[] = MINIMAL PROV_Q
        "groups:\n"
        "  - {name: lb, type: load-balance, balance_by: latency-health,\n"
        "     providers: [{name: p, weight: 1}, {name: q, weight: 100, model: m2}]}\n"
        "  - {name: fb, providers: [{name: q, model: m3}, p]}\n"
        "  - {name: ut, type: url-test, providers: [p]}\n"
        "  - {name: ch, type: cheapest, model: m, providers: [q, p]}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    if (parse(yaml, &c, &p) != GW_OK)
        print_problems(&p);
    assert_non_null(c);
    assert_int_equal(c->groups[0].members[0].weight, 1);
    assert_true(c->groups[0].members[0].weight_set);
    assert_int_equal(c->groups[0].members[1].weight, 100);
    assert_string_equal(c->groups[0].members[1].model, "m2");
    assert_int_equal(c->groups[0].balance_by, GW_BALANCE_LATENCY_HEALTH);
    /* a mapping member without a weight is fine outside load-balance */
    assert_false(c->groups[1].members[0].plain);
    assert_false(c->groups[1].members[0].weight_set);
    assert_int_equal(c->groups[1].members[0].weight, 1);
    assert_true(c->groups[1].members[1].plain);
    assert_int_equal(c->groups[3].type, GW_GROUP_CHEAPEST);
    assert_string_equal(c->groups[3].model, "m");
    gw_conf_free(c);
}

static void
test_conf_group_member_of_a_misnamed_provider_is_not_also_unknown(void **state)
{
    static const char yaml[] =
        LISTEN "providers:\n  - {name: Bad, dialect: openai, base_url: \"http://h\", "
               "keys: [{value: v}], models: [m]}\n"
               "groups: [{name: g, type: bogus, providers: [Bad, {name: Bad2, weight: 2}]}]\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_E_CFG_BAD_NAME);
    /* the provider's own name problem, the type, and Bad2 is unknown; no weight noise
     * while the type itself is wrong, no "unknown member Bad" */
    assert_true(has_problem(&p, GW_E_CFG_BAD_NAME, "providers[0] (Bad).name", "Bad"));
    assert_true(has_problem(&p, GW_E_CFG_BAD_VALUE, "groups[0] (g).type", "bogus"));
    assert_true(has_problem(&p, GW_E_ENG_GROUP_UNKNOWN_MEMBER,
                            "groups[0] (g).providers[1] (Bad2).name", "Bad2"));
    assert_int_equal(p.n, 3);
    gw_conf_problems_fini(&p);
}

static void
test_conf_min_speed_range_names_field_value_min_and_max(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;
    char line[256];

    (void)state;
    assert_int_equal(parse(PROV_WITH("min_speed: {tokens_per_sec: 2000, window_secs: 3}"), &c, &p),
                     GW_E_CFG_MIN_SPEED_RANGE);
    assert_int_equal(p.n, 2);
    gw_conf_problem_format(&p.v[0], line, sizeof(line));
    assert_string_equal(line, "providers[0] (p).min_speed.tokens_per_sec: 2000 "
                              "(config.min_speed_range) must be 1..1000");
    gw_conf_problem_format(&p.v[1], line, sizeof(line));
    assert_string_equal(line, "providers[0] (p).min_speed.window_secs: 3 "
                              "(config.min_speed_range) must be 5..120");
    gw_conf_problems_fini(&p);
    /* one field alone is incomplete */
    assert_int_equal(parse(PROV_WITH("min_speed: {tokens_per_sec: 10}"), &c, &p),
                     GW_E_CFG_MISSING_FIELD);
    assert_true(
        has_problem(&p, GW_E_CFG_MISSING_FIELD, "providers[0] (p).min_speed.window_secs", NULL));
    gw_conf_problems_fini(&p);
    /* the edges are accepted */
    assert_int_equal(parse(PROV_WITH("min_speed: {tokens_per_sec: 1, window_secs: 120}"), &c, &p),
                     GW_OK);
    assert_int_equal(c->providers[0].min_speed_tps, 1);
    assert_int_equal(c->providers[0].min_speed_window_secs, 120);
    gw_conf_free(c);
    assert_int_equal(parse(PROV_WITH("min_speed: {tokens_per_sec: 1000, window_secs: 5}"), &c, &p),
                     GW_OK);
    gw_conf_free(c);
}

static void
test_conf_slow_start_wait_is_checked_only_with_next_on_slow_start(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(FO("stream_start_wait_secs: 5, next_on_slow_start: true"), &c, &p),
                     GW_OK);
    assert_int_equal(c->failover.stream_start_wait_secs, 5);
    gw_conf_free(c);
    assert_int_equal(parse(FO("stream_start_wait_secs: 1, next_on_slow_start: false"), &c, &p),
                     GW_OK);
    gw_conf_free(c);
    assert_int_equal(parse(FO("stream_start_wait_secs: 2, next_on_slow_start: yes"), &c, &p),
                     GW_E_CFG_SLOW_START_TOO_SHORT);
    assert_int_equal(p.n, 1);
    assert_true(
        has_problem(&p, GW_E_CFG_SLOW_START_TOO_SHORT, "failover.stream_start_wait_secs", "2"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_problem_format_is_path_value_code_msg(void **state)
{
    struct gw_conf_problem pr = {GW_E_CFG_SLOW_START_TOO_SHORT,
                                 (char *)(uintptr_t) "failover.stream_start_wait_secs",
                                 (char *)(uintptr_t) "3", (char *)(uintptr_t) "too short"};
    char buf[128], tiny[8];

    (void)state;
    gw_conf_problem_format(&pr, buf, sizeof(buf));
    assert_string_equal(
        buf, "failover.stream_start_wait_secs: 3 (config.slow_start_too_short) too short");
    gw_conf_problem_format(&pr, tiny, sizeof(tiny));
    assert_string_equal(tiny, "failove");
}

/* ---- secrets and the environment ---- */

static void
test_conf_env_key_is_resolved(void **state)
{
    static const struct fake_var v[] = {{"UP_KEY", "sk-from-env"}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(LISTEN "providers:\n  - {name: p, dialect: openai, base_url: "
                                  "\"http://h\", keys: [{env: UP_KEY}, {value: lit}], "
                                  "models: [m]}\n",
                           &c, &p),
                     GW_OK);
    assert_int_equal(c->providers[0].n_keys, 2);
    assert_string_equal(c->providers[0].keys[0].env, "UP_KEY");
    assert_string_equal(c->providers[0].keys[0].secret, "sk-from-env");
    assert_null(c->providers[0].keys[1].env);
    assert_string_equal(c->providers[0].keys[1].secret, "lit");
    gw_conf_free(c);
}

static void
test_conf_env_unset_names_field_and_variable(void **state)
{
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = NULL;
    assert_int_equal(parse(LISTEN "providers:\n  - {name: p, dialect: openai, base_url: "
                                  "\"http://h\", keys: [{value: v}, {env: NOPE}], models: [m]}\n"
                                  "clients: [{name: a, key_env: ALSO_NOPE}]\n",
                           &c, &p),
                     GW_E_CFG_ENV_UNSET);
    assert_int_equal(p.n, 2);
    assert_true(has_problem(&p, GW_E_CFG_ENV_UNSET, "providers[0] (p).keys[1].env", "NOPE"));
    assert_true(has_problem(&p, GW_E_CFG_ENV_UNSET, "clients[0] (a).key_env", "ALSO_NOPE"));
    assert_non_null(strstr(p.v[0].msg, "NOPE"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_secret_never_in_problem_text(void **state)
{
    static const struct fake_var v[] = {{"E", "sk-ENVSEKRIT"}, {NULL, NULL}};
    static const char *const yamls[] = {
        /* bad fields next to a literal secret and a resolved one */
        LISTEN "providers:\n  - {name: P, dialect: x, base_url: \"ftp://h\", keys: [{value: "
               "sk-SEKRIT}, {env: E}, {env: E, value: sk-SEKRIT}], models: [m]}\n",
        /* a secret in a credentials URL */
        LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"https://u:sk-SEKRIT@h:0\", "
               "keys: [{value: v}], models: [m]}\n",
        /* a secret where a list was expected */
        LISTEN "providers:\n  - {name: p, keys: sk-SEKRIT}\n",
        /* a secret under a misspelt key */
        LISTEN "providers:\n  - {name: p, keys: [{valeu: sk-SEKRIT}]}\n",
        /* a secret written as a key */
        LISTEN "providers:\n  - {name: p, keys: [{sk-SEKRIT}]}\n",
        LISTEN "providers:\n  - {name: p, keys: [{value: v, sk-SEKRIT: 1}]}\n",
        /* a secret where a string was expected ... as a list item */
        LISTEN "providers:\n  - {name: p, keys: [sk-SEKRIT]}\n",
        /* a key pasted into key_sha256 */
        MINIMAL "clients: [{name: a, key_sha256: sk-SEKRIT}]\n",
    };
    size_t i, j;

    (void)state;
    vars = v;
    for (i = 0; i < sizeof(yamls) / sizeof(yamls[0]); i++) {
        struct gw_conf_problems p;
        struct gw_conf *c;
        char line[512];

        assert_int_not_equal(parse(yamls[i], &c, &p), GW_OK);
        assert_true(p.n > 0);
        for (j = 0; j < p.n; j++) {
            gw_conf_problem_format(&p.v[j], line, sizeof(line));
            if (strstr(line, "SEKRIT")) {
                print_message("case %zu leaks: %s\n", i, line);
                fail();
            }
        }
        gw_conf_problems_fini(&p);
    }
}

/* issue 8: a refused value that may hold a secret (a base_url with userinfo, a query or
 * a fragment; a key pasted where a variable's name goes) is shown as "(hidden)". */
static void
test_issue_8_refused_values_that_may_hold_a_secret_are_hidden(void **state)
{
    static const struct {
        const char *yaml;
        enum gw_code code;
        const char *path;
    } cases[] = {
        {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: "
                "\"https://h/v1?api_key=sk-SEKRIT\", keys: [{value: v}], models: [m]}\n",
         GW_E_CFG_BAD_URL, "providers[0] (p).base_url"},
        {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: "
                "\"https://u:sk-SEKRIT@h\", keys: [{value: v}], models: [m]}\n",
         GW_E_CFG_BAD_URL, "providers[0] (p).base_url"},
        {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: "
                "\"https://h/#sk-SEKRIT\", keys: [{value: v}], models: [m]}\n",
         GW_E_CFG_BAD_URL, "providers[0] (p).base_url"},
        {LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"http://h\", "
                "keys: [{env: sk-SEKRIT-1}], models: [m]}\n",
         GW_E_CFG_BAD_VALUE, "providers[0] (p).keys[0].env"},
        {MINIMAL "clients: [{name: a, key_env: gw-SEKRIT-1}]\n", GW_E_CFG_BAD_VALUE,
         "clients[0] (a).key_env"},
        {MINIMAL "control: {token_env: ctl-SEKRIT-1}\n", GW_E_CFG_BAD_VALUE, "control.token_env"},
    };
    size_t i, j;

    (void)state;
    vars = NULL;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_conf_problems p;
        struct gw_conf *c;
        char line[512];

        assert_int_not_equal(parse(cases[i].yaml, &c, &p), GW_OK);
        if (!has_problem(&p, cases[i].code, cases[i].path, "(hidden)")) {
            print_message("case %zu:\n", i);
            print_problems(&p);
            fail();
        }
        for (j = 0; j < p.n; j++) {
            gw_conf_problem_format(&p.v[j], line, sizeof(line));
            if (strstr(line, "SEKRIT")) {
                print_message("case %zu leaks: %s\n", i, line);
                fail();
            }
        }
        gw_conf_problems_fini(&p);
    }
}

/* ---- clients and keys ---- */

static void
test_conf_key_sha256_is_decoded_any_case(void **state)
{
    static const char yaml[] = MINIMAL "clients:\n"
                                       "  - {name: a, key_sha256: \"" DIGEST_A "\"}\n"
                                       "  - {name: b, key_sha256: \"72EE9D4355CCB9D3A4C9DBF37382E3"
                                       "8E75C1B1A225B5BD1F729EE91BBDA30C20\"}\n";
    unsigned char want[32];
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_true(gw_hex_decode32(GW_STR_LIT(DIGEST_A), want));
    assert_memory_equal(c->clients[0].key_digest, want, 32);
    assert_true(gw_hex_decode32(GW_STR_LIT(DIGEST_B), want));
    assert_memory_equal(c->clients[1].key_digest, want, 32);
    assert_null(c->clients[0].key_env);
    gw_conf_free(c);
}

static void
test_conf_key_sha256_bad_is_refused_without_echo(void **state)
{
    static const char *const bad[] = {
        MINIMAL "clients: [{name: a, key_sha256: \"3a9049c62b74d338ebcabad13065aa0a5435e1efdba0"
                "176c9c17a5bfa1fac5f\"}]\n", /* 63 */
        MINIMAL "clients: [{name: a, key_sha256: \"3a9049c62b74d338ebcabad13065aa0a5435e1efdba0"
                "176c9c17a5bfa1fac5fz\"}]\n", /* not hex */
    };
    size_t i;

    (void)state;
    for (i = 0; i < 2; i++) {
        struct gw_conf_problems p;
        struct gw_conf *c;

        assert_int_equal(parse(bad[i], &c, &p), GW_E_CFG_BAD_SHA256);
        assert_true(has_problem(&p, GW_E_CFG_BAD_SHA256, "clients[0] (a).key_sha256", NULL));
        assert_null(strstr(p.v[0].value, "3a9049"));
        gw_conf_problems_fini(&p);
    }
}

static void
test_conf_key_env_digest_uses_env_sha256(void **state)
{
    static const struct fake_var v[] = {{"K_A", "alice-key"}, {NULL, NULL}};
    unsigned char want[32];
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(parse(MINIMAL "clients: [{name: a, key_env: K_A}]\n", &c, &p), GW_OK);
    fake_sha256("alice-key", 9, want);
    assert_memory_equal(c->clients[0].key_digest, want, 32);
    assert_string_equal(c->clients[0].key_env, "K_A");
    gw_conf_free(c);
}

static void
test_conf_duplicate_client_key_across_env_and_digest(void **state)
{
    static const struct fake_var v[] = {{"K1", "same"}, {"K2", "same"}, {NULL, NULL}};
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    vars = v;
    assert_int_equal(
        parse(MINIMAL "clients: [{name: a, key_env: K1}, {name: b, key_env: K2}]\n", &c, &p),
        GW_E_CFG_DUPLICATE_KEY);
    assert_true(has_problem(&p, GW_E_CFG_DUPLICATE_KEY, "clients[1] (b).key_env", "K2"));
    gw_conf_problems_fini(&p);
}

static void
test_conf_client_by_digest_finds_and_misses(void **state)
{
    static const char yaml[] = MINIMAL "clients:\n"
                                       "  - {name: a, key_sha256: \"" DIGEST_A "\"}\n"
                                       "  - {name: b, key_sha256: \"" DIGEST_B "\"}\n";
    unsigned char d[32];
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_true(gw_hex_decode32(GW_STR_LIT(DIGEST_B), d));
    assert_ptr_equal(gw_conf_client_by_digest(c, d), &c->clients[1]);
    assert_true(gw_hex_decode32(GW_STR_LIT(DIGEST_A), d));
    assert_ptr_equal(gw_conf_client_by_digest(c, d), &c->clients[0]);
    d[31] ^= 1;
    assert_null(gw_conf_client_by_digest(c, d));
    gw_conf_free(c);
}

static void
test_conf_client_allows_its_scope_only(void **state)
{
    static const char yaml[] = MINIMAL "clients:\n"
                                       "  - {name: a, key_sha256: \"" DIGEST_A "\", "
                                       "models: [smart, gpt-4.1-mini]}\n"
                                       "  - {name: b, key_sha256: \"" DIGEST_B "\"}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_true(gw_conf_client_allows(&c->clients[0], "smart", 5));
    assert_true(gw_conf_client_allows(&c->clients[0], "gpt-4.1-mini", 12));
    assert_false(gw_conf_client_allows(&c->clients[0], "gpt-4.1", 7));
    assert_false(gw_conf_client_allows(&c->clients[0], "smartx", 6));
    assert_false(gw_conf_client_allows(&c->clients[0], "smar", 4));
    assert_true(gw_conf_client_allows(&c->clients[1], "anything", 8));
    gw_conf_free(c);
}

/* ---- base_url ---- */

static const struct gw_conf_provider *
one_provider(const char *url, struct gw_conf **c)
{
    char yaml[512];
    struct gw_conf_problems p;

    snprintf(yaml, sizeof(yaml),
             LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"%s\", "
                    "keys: [{value: v}], models: [m]}\n",
             url);
    if (parse(yaml, c, &p) != GW_OK) {
        print_problems(&p);
        gw_conf_problems_fini(&p);
        return NULL;
    }
    return &(*c)->providers[0];
}

static void
test_conf_base_url_is_split(void **state)
{
    const struct gw_conf_provider *pv;
    struct gw_conf *c;

    (void)state;
    pv = one_provider("https://api.openai.com", &c);
    assert_non_null(pv);
    assert_true(pv->tls);
    assert_string_equal(pv->host, "api.openai.com");
    assert_int_equal(pv->port, 443);
    assert_string_equal(pv->path_prefix, "");
    assert_string_equal(pv->base_url, "https://api.openai.com");
    gw_conf_free(c);

    pv = one_provider("http://127.0.0.1:9100/", &c);
    assert_non_null(pv);
    assert_false(pv->tls);
    assert_string_equal(pv->host, "127.0.0.1");
    assert_int_equal(pv->port, 9100);
    assert_string_equal(pv->path_prefix, "");
    gw_conf_free(c);

    pv = one_provider("http://relay", &c);
    assert_non_null(pv);
    assert_int_equal(pv->port, 80);
    gw_conf_free(c);

    pv = one_provider("HTTPS://relay.example.net/gw/v1/", &c);
    assert_non_null(pv);
    assert_true(pv->tls);
    assert_int_equal(pv->port, 443);
    assert_string_equal(pv->path_prefix, "/gw/v1");
    gw_conf_free(c);

    pv = one_provider("https://[2001:db8::1]:8443/p", &c);
    assert_non_null(pv);
    assert_string_equal(pv->host, "2001:db8::1");
    assert_int_equal(pv->port, 8443);
    assert_string_equal(pv->path_prefix, "/p");
    gw_conf_free(c);
}

static void
test_conf_base_url_bad_forms_are_refused(void **state)
{
    static const char *const bad[] = {"ftp://h",     "h:80",           "https://",
                                      "https://:80", "https://h:x",    "https://h:70000",
                                      "http://h h",  "https://h#frag", "//h"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[512];
        struct gw_conf_problems p;
        struct gw_conf *c;

        snprintf(yaml, sizeof(yaml),
                 LISTEN "providers:\n  - {name: p, dialect: openai, base_url: \"%s\", "
                        "keys: [{value: v}], models: [m]}\n",
                 bad[i]);
        assert_int_equal(parse(yaml, &c, &p), GW_E_CFG_BAD_URL);
        /* issue 8: a fragment may hold a credential (?query and user@ are refused too) */
        assert_true(has_problem(&p, GW_E_CFG_BAD_URL, "providers[0] (p).base_url",
                                strchr(bad[i], '#') ? "(hidden)" : bad[i]));
        gw_conf_problems_fini(&p);
    }
}

/* ---- candidates ---- */

static void
test_conf_candidates_in_file_order_with_star_and_without_disabled(void **state)
{
    static const char yaml[] =
        LISTEN "providers:\n"
               "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: v}], "
               "models: [m1, m2]}\n"
               "  - {name: b, dialect: anthropic, base_url: \"http://b\", keys: [{value: v}], "
               "models: [\"*\"]}\n"
               "  - {name: c, dialect: openai, base_url: \"http://c\", keys: [{value: v}], "
               "models: [m1], enabled: false}\n"
               "  - {name: d, dialect: gemini, base_url: \"http://d\", keys: [{value: v}], "
               "models: [m1]}\n";
    const struct gw_conf_provider *out[8];
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_true(c->providers[1].any_model);
    assert_false(c->providers[0].any_model);
    assert_false(c->providers[2].enabled);
    assert_int_equal(gw_conf_candidates(c, "m1", 2, out, 8), 3);
    assert_string_equal(out[0]->name, "a");
    assert_string_equal(out[1]->name, "b");
    assert_string_equal(out[2]->name, "d");
    assert_int_equal(out[2]->index, 3);
    assert_int_equal(gw_conf_candidates(c, "m2", 2, out, 8), 2);
    assert_string_equal(out[1]->name, "b");
    assert_int_equal(gw_conf_candidates(c, "zzz", 3, out, 8), 1);
    assert_string_equal(out[0]->name, "b");
    /* slices: "m1x" cut to 2 bytes is "m1" */
    assert_int_equal(gw_conf_candidates(c, "m1x", 2, out, 8), 3);
    /* at most max */
    assert_int_equal(gw_conf_candidates(c, "m1", 2, out, 1), 1);
    assert_string_equal(out[0]->name, "a");
    gw_conf_free(c);
}

/* ---- groups and the later keys ---- */

static void
test_conf_group_members_plain_and_mapping_are_told_apart(void **state)
{
    static const char yaml[] =
        MINIMAL "  - {name: relay, dialect: anthropic, base_url: \"http://r\", keys: [{value: v}], "
                "models: [\"*\"]}\n"
                "groups:\n"
                "  - name: smart\n"
                "    type: load-balance\n"
                "    model: gpt-4.1\n"
                "    providers: [{name: relay, weight: 7, model: claude}, p]\n"
                "    balance_by: latency-health\n"
                "  - name: plain\n"
                "    providers:\n"
                "      - p\n"
                "      - name: relay\n";
    struct gw_conf_problems p;
    struct gw_conf *c;
    const struct gw_conf_group *g;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_int_equal(c->n_groups, 2);
    g = &c->groups[0];
    assert_string_equal(g->name, "smart");
    assert_int_equal(g->type, GW_GROUP_LOAD_BALANCE);
    assert_string_equal(g->model, "gpt-4.1");
    assert_int_equal(g->balance_by, GW_BALANCE_LATENCY_HEALTH);
    assert_true(g->balance_by_set);
    assert_int_equal(g->n_members, 2);
    assert_string_equal(g->members[0].provider, "relay");
    assert_int_equal(g->members[0].weight, 7);
    assert_string_equal(g->members[0].model, "claude");
    assert_false(g->members[0].plain);
    assert_true(g->members[0].weight_set);
    assert_string_equal(g->members[1].provider, "p");
    assert_int_equal(g->members[1].weight, 1);
    assert_null(g->members[1].model);
    assert_true(g->members[1].plain);
    g = &c->groups[1];
    assert_int_equal(g->type, GW_GROUP_FALLBACK);
    assert_false(g->balance_by_set);
    assert_int_equal(g->balance_by, GW_BALANCE_WEIGHTS);
    assert_null(g->model);
    assert_true(g->members[0].plain);
    assert_false(g->members[0].weight_set);
    assert_false(g->members[1].plain);
    assert_false(g->members[1].weight_set);
    assert_string_equal(g->members[1].provider, "relay");
    assert_int_equal(g->members[1].weight, 1);
    gw_conf_free(c);
}

static void
test_conf_quota_pool_account_and_local_cap(void **state)
{
    static const char yaml[] = PROV_WITH("quota: {pool: account, local_cooldown_cap_secs: 30, "
                                         "default: {rpd: 100}}");
    struct gw_conf_problems p;
    struct gw_conf *c;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    assert_int_equal(c->providers[0].quota_pool, GW_QUOTA_POOL_ACCOUNT);
    assert_int_equal(c->providers[0].quota_local_cap_secs, 30);
    assert_true(c->providers[0].quota_probes);
    assert_int_equal(c->providers[0].quota_default.rpd, 100);
    gw_conf_free(c);
}

static void
test_conf_later_provider_and_client_keys_are_stored(void **state)
{
    static const char yaml[] =
        LISTEN "providers:\n"
               "  - name: p\n"
               "    dialect: openai\n"
               "    base_url: http://h\n"
               "    keys: [{value: v}]\n"
               "    models: [m]\n"
               "    min_speed: {tokens_per_sec: 15, window_secs: 20}\n"
               "    model_specs: {m: {context_window: 1000, max_output_tokens: 50, input: 1.5}}\n"
               "    billing: free\n"
               "    http2: on\n"
               "    quota:\n"
               "      default: {rpm: 500, tpd: 9}\n"
               "      models: {m: {rpm: 60}, n: {tpm: 7}}\n"
               "      pool: model\n"
               "      local_cooldown_cap_secs: 0\n"
               "      probes: false\n"
               "clients:\n"
               "  - name: a\n"
               "    key_sha256: \"" DIGEST_A "\"\n"
               "    max_concurrent: 4\n"
               "    limits:\n"
               "      - {per: minute, requests: 60}\n"
               "      - {per: day, cost: 5.25}\n"
               "      - {per: month, tokens: 20000000, cache_reads: true}\n";
    struct gw_conf_problems p;
    struct gw_conf *c;
    const struct gw_conf_provider *pv;
    const struct gw_conf_client *cl;

    (void)state;
    assert_int_equal(parse(yaml, &c, &p), GW_OK);
    pv = &c->providers[0];
    assert_int_equal(pv->min_speed_tps, 15);
    assert_int_equal(pv->min_speed_window_secs, 20);
    assert_int_equal(pv->n_model_specs, 1);
    assert_string_equal(pv->model_specs[0].model, "m");
    assert_int_equal(pv->model_specs[0].context_window, 1000);
    assert_int_equal(pv->model_specs[0].max_output_tokens, 50);
    assert_true(pv->model_specs[0].input == 1.5);
    assert_true(pv->model_specs[0].output < 0);
    assert_int_equal(pv->billing, GW_BILLING_FREE);
    assert_int_equal(pv->http2, GW_HTTP2_ON);
    assert_true(pv->has_quota);
    assert_int_equal(pv->quota_default.rpm, 500);
    assert_int_equal(pv->quota_default.tpm, 0);
    assert_int_equal(pv->quota_default.tpd, 9);
    assert_int_equal(pv->quota_pool, GW_QUOTA_POOL_MODEL);
    assert_int_equal(pv->quota_local_cap_secs, 0);
    assert_false(pv->quota_probes);
    assert_int_equal(pv->n_quota_models, 2);
    assert_string_equal(pv->quota_models[1].model, "n");
    assert_int_equal(pv->quota_models[1].win.tpm, 7);
    assert_int_equal(pv->quota_models[0].win.rpm, 60);
    cl = &c->clients[0];
    assert_int_equal(cl->max_concurrent, 4);
    assert_int_equal(cl->n_limits, 3);
    assert_int_equal(cl->limits[0].per, GW_LIMIT_MINUTE);
    assert_true(cl->limits[0].has_requests);
    assert_int_equal(cl->limits[0].requests, 60);
    assert_int_equal(cl->limits[1].per, GW_LIMIT_DAY);
    assert_true(cl->limits[1].has_cost);
    assert_int_equal(cl->limits[1].cost_micros, 5250000);
    assert_int_equal(cl->limits[2].per, GW_LIMIT_MONTH);
    assert_true(cl->limits[2].cache_reads);
    assert_int_equal(cl->limits[2].tokens, 20000000);
    gw_conf_free(c);
}

/* ---- the files of etc/ ---- */

static void
test_conf_loads_demo_config(void **state)
{
    unsigned char want[32];
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    size_t len;
    char *yaml = read_file("etc/gw.yaml", &len);

    (void)state;
    vars = NULL;
    assert_non_null(yaml);
    if (gw_conf_parse(yaml, len, "etc", &env, &c, &p) != GW_OK)
        print_problems(&p);
    assert_non_null(c);
    assert_int_equal(c->server.n_listen, 1);
    assert_string_equal(c->server.listen[0].host, "127.0.0.1");
    assert_int_equal(c->server.listen[0].port, 8080);
    assert_int_equal(c->server.workers, 2);
    assert_int_equal(c->control.listen.port, 8081);
    assert_string_equal(c->store.path, "etc/../build/demo-store");
    assert_int_equal(c->n_providers, 1);
    assert_string_equal(c->providers[0].name, "mock");
    assert_int_equal(c->providers[0].dialect, GW_DIALECT_OPENAI);
    assert_string_equal(c->providers[0].host, "127.0.0.1");
    assert_int_equal(c->providers[0].port, 9100);
    assert_string_equal(c->providers[0].keys[0].secret, "mock-upstream-key");
    assert_true(c->providers[0].any_model);
    assert_int_equal(c->n_clients, 1);
    assert_string_equal(c->clients[0].name, "demo");
    /* printf '%s' gw-demo-key | sha256sum */
    assert_true(gw_hex_decode32(GW_STR_LIT(DIGEST_A), want));
    assert_ptr_equal(gw_conf_client_by_digest(c, want), &c->clients[0]);
    gw_conf_free(c);
    free(yaml);
}

static void
test_conf_loads_example_config(void **state)
{
    static const struct fake_var v[] = {{"OPENAI_API_KEY", "sk-openai"},
                                        {"RELAY_KEY", "sk-relay"},
                                        {"AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"},
                                        {"AWS_SECRET_ACCESS_KEY", "aws-secret"},
                                        {"GW_KEY_BOB", "bob-key"},
                                        {"GW_CONTROL_TOKEN", "ctl"},
                                        {NULL, NULL}};
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    size_t len;
    char *yaml = read_file("etc/gw.example.yaml", &len);

    (void)state;
    vars = v;
    assert_non_null(yaml);
    if (gw_conf_parse(yaml, len, "/etc/gw", &env, &c, &p) != GW_OK)
        print_problems(&p);
    assert_non_null(c);
    assert_int_equal(c->n_providers, 4);
    assert_int_equal(c->providers[3].dialect, GW_DIALECT_BEDROCK);
    assert_string_equal(c->providers[3].host, "bedrock-runtime.us-east-1.amazonaws.com");
    assert_string_equal(c->providers[3].aws_secret.secret, "aws-secret");
    /* one group of each type, both member forms */
    assert_int_equal(c->n_groups, 4);
    assert_int_equal(c->groups[0].type, GW_GROUP_LOAD_BALANCE);
    assert_true(c->groups[0].balance_by_set);
    assert_int_equal(c->groups[0].members[0].weight, 7);
    assert_false(c->groups[0].members[0].plain);
    assert_true(c->groups[0].members[1].plain);
    assert_int_equal(c->groups[1].type, GW_GROUP_FALLBACK);
    assert_int_equal(c->groups[2].type, GW_GROUP_URL_TEST);
    assert_int_equal(c->groups[3].type, GW_GROUP_CHEAPEST);
    assert_true(c->prices_explicit);
    assert_int_equal(c->providers[0].min_speed_tps, 15);
    assert_int_equal(c->providers[0].n_model_specs, 1);
    assert_int_equal(c->n_clients, 2);
    assert_string_equal(c->control.token, "ctl");
    assert_string_equal(c->providers[1].path_prefix, "/gw");
    assert_false(c->providers[2].enabled);
    assert_string_equal(c->prices_path, "/etc/gw/prices.yaml");
    assert_null(c->server.tls_cert); /* shown commented out: gwd --check reads the files */
    assert_true(c->store.responses);
    gw_conf_free(c);
    free(yaml);

    /* without its variables, the example names each of them */
    vars = NULL;
    yaml = read_file("etc/gw.example.yaml", &len);
    assert_non_null(yaml);
    assert_int_equal(gw_conf_parse(yaml, len, "/etc/gw", &env, &c, &p), GW_E_CFG_ENV_UNSET);
    assert_int_equal(p.n, 5); /* OPENAI_API_KEY, RELAY_KEY, the two AWS ones, GW_KEY_BOB */
    gw_conf_problems_fini(&p);
    free(yaml);
}

/* ---- out of memory ---- */

static void
oom_walk(const char *yaml, enum gw_code want)
{
    unsigned long n;
    enum gw_code rc = GW_E_NOMEM;

    for (n = 1; n < 20000 && rc == GW_E_NOMEM; n++) {
        struct gw_conf_problems p = {0};
        struct gw_conf *c = NULL;

        gw_alloc_fail_at(n);
        rc = gw_conf_parse(yaml, strlen(yaml), "/d", &env, &c, &p);
        gw_alloc_fail_at(0);
        if (rc == GW_E_NOMEM) {
            assert_null(c);
            assert_int_equal(p.n, 0);
        } else {
            assert_int_equal(rc, want);
        }
        gw_conf_free(c);
        gw_conf_problems_fini(&p);
    }
    assert_int_equal(rc, want);
}

static void
test_conf_every_allocation_failure_ends_cleanly(void **state)
{
    static const struct fake_var v[] = {{"K", "k"}, {NULL, NULL}};

    (void)state;
    vars = v;
    oom_walk(MINIMAL PROV_Q "store: {path: data}\nprices: p.yaml\n"
                            "groups: [{name: g, type: load-balance, balance_by: health,\n"
                            "          providers: [p, {name: q, model: x, weight: 3}]}]\n"
                            "clients: [{name: a, key_env: K, models: [m], limits: [{per: day, "
                            "requests: 1}]}]\n",
             GW_OK);
    oom_walk("server: {listen: [\"h\"], workers: 999}\n" PROVS, GW_E_CFG_BAD_LISTEN);
    oom_walk("server: {bogus: 1}\n", GW_E_CFG_UNKNOWN_FIELD);
}

/* ---- names ---- */

static void
test_conf_enum_names(void **state)
{
    (void)state;
    assert_string_equal(gw_dialect_str(GW_DIALECT_OPENAI), "openai");
    assert_string_equal(gw_dialect_str(GW_DIALECT_RESPONSES), "responses");
    assert_string_equal(gw_dialect_str(GW_DIALECT_ANTHROPIC), "anthropic");
    assert_string_equal(gw_dialect_str(GW_DIALECT_GEMINI), "gemini");
    assert_string_equal(gw_dialect_str((enum gw_dialect)99), "unknown");
    assert_string_equal(gw_billing_str(GW_BILLING_FREE), "free");
    assert_string_equal(gw_group_type_str(GW_GROUP_URL_TEST), "url-test");
    assert_string_equal(gw_balance_by_str(GW_BALANCE_WEIGHTS), "weights");
    assert_string_equal(gw_limit_per_str(GW_LIMIT_WEEK), "week");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf_defaults_apply_when_keys_absent),
        cmocka_unit_test(test_conf_written_values_replace_defaults),
        cmocka_unit_test(test_conf_control_token_unset_is_null_not_an_error),
        cmocka_unit_test(test_conf_listen_port_zero_means_any_free_port),
        cmocka_unit_test(test_conf_store_responses_defaults_to_true_and_turns_off),
        cmocka_unit_test(test_conf_log_format_and_level),
        cmocka_unit_test(test_conf_proxy_from_file_with_auth_from_env),
        cmocka_unit_test(test_conf_environment_proxy_per_scheme_and_no_proxy),
        cmocka_unit_test(test_conf_proxy_problems_are_named_and_hide_secrets),
        cmocka_unit_test(test_conf_ca_file_is_checked_by_the_callers_reader_with_other_problems),
        cmocka_unit_test(test_conf_tls_listen_beside_listen_and_the_pair_checked_by_the_caller),
        cmocka_unit_test(test_conf_relative_paths_without_dir_stay_as_written),
        cmocka_unit_test(test_conf_each_bad_value_gets_its_code_path_and_value),
        cmocka_unit_test(test_conf_max_buffered_body_follows_max_body_when_absent),
        cmocka_unit_test(test_conf_range_edges_are_accepted),
        cmocka_unit_test(test_conf_unknown_field_names_path_and_key),
        cmocka_unit_test(test_issue_12_every_problem_of_a_file_in_one_run_with_names),
        cmocka_unit_test(test_issue_12_a_refused_value_is_not_also_missing),
        cmocka_unit_test(test_conf_unknown_top_level_section),
        cmocka_unit_test(test_conf_wrong_type_names_path_and_value),
        cmocka_unit_test(test_conf_duplicate_key_is_refused),
        cmocka_unit_test(test_conf_syntax_error_gives_line_and_column),
        cmocka_unit_test(test_conf_alias_is_refused),
        cmocka_unit_test(test_conf_empty_document_reports_what_is_required),
        cmocka_unit_test(test_conf_reports_every_problem_at_once),
        cmocka_unit_test(test_conf_group_problems_are_all_reported_at_once),
        cmocka_unit_test(test_conf_group_edges_are_accepted),
        cmocka_unit_test(test_conf_group_member_of_a_misnamed_provider_is_not_also_unknown),
        cmocka_unit_test(test_conf_min_speed_range_names_field_value_min_and_max),
        cmocka_unit_test(test_conf_slow_start_wait_is_checked_only_with_next_on_slow_start),
        cmocka_unit_test(test_conf_problem_format_is_path_value_code_msg),
        cmocka_unit_test(test_conf_env_key_is_resolved),
        cmocka_unit_test(test_conf_env_unset_names_field_and_variable),
        cmocka_unit_test(test_conf_secret_never_in_problem_text),
        cmocka_unit_test(test_issue_8_refused_values_that_may_hold_a_secret_are_hidden),
        cmocka_unit_test(test_conf_key_sha256_is_decoded_any_case),
        cmocka_unit_test(test_conf_key_sha256_bad_is_refused_without_echo),
        cmocka_unit_test(test_conf_key_env_digest_uses_env_sha256),
        cmocka_unit_test(test_conf_duplicate_client_key_across_env_and_digest),
        cmocka_unit_test(test_conf_client_by_digest_finds_and_misses),
        cmocka_unit_test(test_conf_client_allows_its_scope_only),
        cmocka_unit_test(test_conf_base_url_is_split),
        cmocka_unit_test(test_conf_base_url_bad_forms_are_refused),
        cmocka_unit_test(test_conf_candidates_in_file_order_with_star_and_without_disabled),
        cmocka_unit_test(test_conf_group_members_plain_and_mapping_are_told_apart),
        cmocka_unit_test(test_conf_later_provider_and_client_keys_are_stored),
        cmocka_unit_test(test_conf_quota_pool_account_and_local_cap),
        cmocka_unit_test(test_conf_loads_demo_config),
        cmocka_unit_test(test_conf_loads_example_config),
        cmocka_unit_test(test_conf_every_allocation_failure_ends_cleanly),
        cmocka_unit_test(test_conf_enum_names),
        cmocka_unit_test(test_conf_bedrock_takes_aws_credentials_and_a_default_endpoint),
        cmocka_unit_test(test_conf_bedrock_problems_are_named),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
