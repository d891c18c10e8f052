/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_confdiff.c - what a reload changes: providers, groups and clients
 * added, removed and changed by name, settings sections, position and spelling not
 * counted as changes, secrets counted but never shown, the log line.
 * Owns:    nothing beyond each test.
 * Threads: single-threaded.
 * See:     core/confdiff.h
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
#include "core/conf.h"
#include "core/confdiff.h"

/* ---- fixtures ---- */

static const char *env_k = "key-one"; /* the value of the variable K, NULL: unset */

static const char *
fake_getenv(void *arg, const char *name)
{
    (void)arg;
    return strcmp(name, "K") == 0 ? env_k : NULL;
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

static struct gw_conf *
load(const char *yaml)
{
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    char line[512];
    size_t i;

    if (gw_conf_parse(yaml, strlen(yaml), "/etc/gw", &env, &c, &p) != GW_OK) {
        for (i = 0; i < p.n; i++) {
            gw_conf_problem_format(&p.v[i], line, sizeof(line));
            print_message("  problem: %s\n", line);
        }
        fail_msg("config refused:\n%s", yaml);
    }
    gw_conf_problems_fini(&p);
    return c;
}

/* The diff of two YAML texts, with both configs freed. */
static void
diff_of(const char *a, const char *b, struct gw_confdiff *d)
{
    struct gw_conf *ca = a ? load(a) : NULL, *cb = load(b);

    assert_int_equal(gw_confdiff_build(ca, cb, d), GW_OK);
    gw_conf_free(ca);
    gw_conf_free(cb);
}

/* <l> holds exactly the names of the NULL-terminated list that follows, in order. */
static void
assert_names(const struct gw_confdiff_names *l, ...)
{
    const char *want;
    va_list ap;
    size_t i = 0;

    va_start(ap, l);
    while ((want = va_arg(ap, const char *)) != NULL) {
        if (i >= l->n)
            fail_msg("missing name %s (only %zu names)", want, l->n);
        assert_string_equal(l->v[i], want);
        i++;
    }
    va_end(ap);
    assert_int_equal(l->n, i);
}

#define HEAD "server: {listen: [\"127.0.0.1:8080\"]}\n"
#define PA                                                                                         \
    "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m]}\n"
#define PB                                                                                         \
    "  - {name: b, dialect: openai, base_url: \"http://b\", keys: [{value: s2}], models: [m]}\n"
#define PC                                                                                         \
    "  - {name: c, dialect: openai, base_url: \"http://c\", keys: [{value: s3}], models: [m]}\n"
#define CL_X                                                                                       \
    "  - {name: x, key_sha256: "                                                                   \
    "\"3a9049c62b74d338ebcabad13065aa0a5435e1efdba0176c9c17a5bfa1fac5ff\"}\n"
#define CL_Y "  - {name: y, key_env: K}\n"

/* ---- tests ---- */

static void
test_confdiff_same_file_is_no_change(void **state)
{
    const char *y =
        HEAD "providers:\n" PA PB "clients:\n" CL_X "groups: [{name: g, providers: [a, b]}]\n";
    struct gw_confdiff d;
    char line[128];

    (void)state;
    diff_of(y, y, &d);
    assert_true(gw_confdiff_is_empty(&d));
    gw_confdiff_format(&d, line, sizeof(line));
    assert_string_equal(line, "no change");
    gw_confdiff_fini(&d);
}

static void
test_confdiff_provider_added_and_removed(void **state)
{
    const char *one = HEAD "providers:\n" PA PB, *two = HEAD "providers:\n" PA PB PC;
    struct gw_confdiff d;

    (void)state;
    diff_of(one, two, &d);
    assert_names(&d.providers.added, "c", NULL);
    assert_names(&d.providers.removed, NULL);
    assert_names(&d.providers.changed, NULL);
    assert_int_equal(d.n_settings, 0);
    gw_confdiff_fini(&d);

    diff_of(two, one, &d);
    assert_names(&d.providers.added, NULL);
    assert_names(&d.providers.removed, "c", NULL);
    assert_names(&d.providers.changed, NULL);
    gw_confdiff_fini(&d);
}

static void
test_confdiff_any_provider_field_is_a_change(void **state)
{
    static const char *const edits[] = {
        /* one field differs from PA each */
        "  - {name: a, dialect: anthropic, base_url: \"http://a\", keys: [{value: s1}], models: "
        "[m]}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a2\", keys: [{value: s1}], models: "
        "[m]}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s9}], models: "
        "[m]}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m, "
        "n]}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m], "
        "enabled: false}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m], "
        "max_concurrent: 4}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m], "
        "model_specs: {m: {input: 0.1}}}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m], "
        "billing: free}\n",
        "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s1}], models: [m], "
        "http2: off}\n",
    };
    char yaml[1024];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        struct gw_confdiff d;

        snprintf(yaml, sizeof(yaml), HEAD "providers:\n%s" PB, edits[i]);
        diff_of(HEAD "providers:\n" PA PB, yaml, &d);
        assert_names(&d.providers.changed, "a", NULL);
        assert_names(&d.providers.added, NULL);
        assert_names(&d.providers.removed, NULL);
        gw_confdiff_fini(&d);
    }
}

static void
test_confdiff_close_prices_differ(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(HEAD "providers:\n"
                 "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s}], "
                 "models: [m], model_specs: {m: {input: 0.3}}}\n",
            HEAD "providers:\n"
                 "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: s}], "
                 "models: [m], model_specs: {m: {input: 0.30000000000000004}}}\n",
            &d);
    assert_names(&d.providers.changed, "a", NULL);
    gw_confdiff_fini(&d);
}

static void
test_confdiff_moving_an_entry_is_no_change(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(HEAD "providers:\n" PA PB PC "clients:\n" CL_X CL_Y,
            HEAD "providers:\n" PC PA PB "clients:\n" CL_Y CL_X, &d);
    assert_true(gw_confdiff_is_empty(&d));
    gw_confdiff_fini(&d);
}

static void
test_confdiff_group_member_spelling_is_no_change(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(HEAD "providers:\n" PA PB
                 "groups: [{name: g, type: load-balance, providers: [a, b]}]\n",
            HEAD "providers:\n" PA PB "groups: [{name: g, type: load-balance, balance_by: weights, "
                 "providers: [{name: a}, {name: b, weight: 1}]}]\n",
            &d);
    assert_true(gw_confdiff_is_empty(&d));
    gw_confdiff_fini(&d);
}

static void
test_confdiff_groups_added_removed_changed(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(HEAD "providers:\n" PA PB
                 "groups: [{name: g, providers: [a, b]}, {name: h, providers: [a]}]\n",
            HEAD "providers:\n" PA PB
                 "groups: [{name: k, providers: [a]}, {name: g, providers: [b, a]}]\n",
            &d);
    assert_names(&d.groups.added, "k", NULL);
    assert_names(&d.groups.removed, "h", NULL);
    assert_names(&d.groups.changed, "g", NULL); /* member order is the fallback order */
    assert_true(d.providers.added.n + d.providers.removed.n + d.providers.changed.n == 0);
    gw_confdiff_fini(&d);
}

static void
test_confdiff_clients_and_a_new_key_value(void **state)
{
    struct gw_confdiff d;

    (void)state;
    env_k = "key-one";
    {
        struct gw_conf *a = load(HEAD "providers:\n" PA "clients:\n" CL_X CL_Y), *b;

        env_k = "key-two"; /* the same file; the environment gives y another key */
        b = load(HEAD "providers:\n" PA "clients:\n" CL_Y "  - {name: z, key_sha256: "
                      "\"72ee9d4355ccb9d3a4c9dbf37382e38e75c1b1a225b5bd1f729ee91bbda30c20\"}\n");
        assert_int_equal(gw_confdiff_build(a, b, &d), GW_OK);
        gw_conf_free(a);
        gw_conf_free(b);
    }
    assert_names(&d.clients.added, "z", NULL);
    assert_names(&d.clients.removed, "x", NULL);
    assert_names(&d.clients.changed, "y", NULL);
    gw_confdiff_fini(&d);
    env_k = "key-one";
}

static void
test_confdiff_settings_sections(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(HEAD "providers:\n" PA,
            HEAD "failover: {pause_secs: 5}\nretention: {row_days: 3}\nproviders:\n" PA, &d);
    assert_int_equal(d.n_settings, 2);
    assert_string_equal(d.settings[0], "retention");
    assert_string_equal(d.settings[1], "failover");
    gw_confdiff_fini(&d);
    diff_of(HEAD "providers:\n" PA, HEAD "log: {format: json}\nproviders:\n" PA, &d);
    assert_int_equal(d.n_settings, 1);
    assert_string_equal(d.settings[0], "log");
    gw_confdiff_fini(&d);
}

/* server.tls.listen, and a renewed certificate (same paths, a new context from net)
 * are changes of "server". */
static void
test_confdiff_tls_listen_and_a_new_certificate_change_server(void **state)
{
    static const char tls[] = "server: {listen: [\"127.0.0.1:8080\"], tls: {cert: c.pem, key: "
                              "k.pem}}\nproviders:\n" PA;
    struct gw_conf *a = load(tls), *b = load(tls);
    struct gw_confdiff d;
    int ctx1, ctx2;

    (void)state;
    diff_of(tls,
            "server: {listen: [\"127.0.0.1:8080\"], tls: {cert: c.pem, key: k.pem, listen: "
            "[\"127.0.0.1:8443\"]}}\nproviders:\n" PA,
            &d);
    assert_int_equal(d.n_settings, 1);
    assert_string_equal(d.settings[0], "server");
    gw_confdiff_fini(&d);
    a->server.tls_ctx = &ctx1;
    b->server.tls_ctx = &ctx1;
    assert_int_equal(gw_confdiff_build(a, b, &d), GW_OK);
    assert_int_equal(d.n_settings, 0);
    gw_confdiff_fini(&d);
    b->server.tls_ctx = &ctx2;
    assert_int_equal(gw_confdiff_build(a, b, &d), GW_OK);
    assert_int_equal(d.n_settings, 1);
    assert_string_equal(d.settings[0], "server");
    gw_confdiff_fini(&d);
    gw_conf_free(a);
    gw_conf_free(b);
}

static void
test_confdiff_first_load_adds_everything(void **state)
{
    struct gw_confdiff d;

    (void)state;
    diff_of(NULL, HEAD "providers:\n" PA PB "clients:\n" CL_X, &d);
    assert_names(&d.providers.added, "a", "b", NULL);
    assert_names(&d.clients.added, "x", NULL);
    assert_int_equal(d.n_settings, 7);
    gw_confdiff_fini(&d);
}

static void
test_confdiff_format_names_without_secrets(void **state)
{
    struct gw_confdiff d;
    char line[256], small[16];

    (void)state;
    diff_of(HEAD "providers:\n" PA PB "clients:\n" CL_X,
            HEAD "failover: {pause_secs: 5}\nproviders:\n"
                 "  - {name: a, dialect: openai, base_url: \"http://a\", keys: [{value: "
                 "secret-value}], models: [m]}\n" PC,
            &d);
    gw_confdiff_format(&d, line, sizeof(line));
    assert_string_equal(line, "providers +c -b ~a; clients -x; settings failover");
    assert_null(strstr(line, "secret"));
    gw_confdiff_format(&d, small, sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_string_equal(small + sizeof(small) - 4, "...");
    gw_confdiff_fini(&d);
    assert_true(gw_confdiff_is_empty(&d));
}

static void
test_confdiff_out_of_memory_leaves_it_empty(void **state)
{
    struct gw_conf *a, *b;
    struct gw_confdiff d;
    unsigned long n;
    enum gw_code rc = GW_E_NOMEM;

    (void)state;
    a = load(HEAD "providers:\n" PA PB "clients:\n" CL_X);
    b = load(HEAD "providers:\n" PA PC "clients:\n" CL_Y);
    /* every allocation in turn fails once; the diff is then refused and empty */
    for (n = 1; rc == GW_E_NOMEM && n < 500; n++) {
        gw_alloc_fail_at(n);
        rc = gw_confdiff_build(a, b, &d);
        gw_alloc_fail_at(0);
        if (rc == GW_E_NOMEM)
            assert_true(gw_confdiff_is_empty(&d));
    }
    assert_int_equal(rc, GW_OK);
    assert_names(&d.providers.added, "c", NULL);
    gw_confdiff_fini(&d);
    gw_conf_free(a);
    gw_conf_free(b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_confdiff_same_file_is_no_change),
        cmocka_unit_test(test_confdiff_provider_added_and_removed),
        cmocka_unit_test(test_confdiff_any_provider_field_is_a_change),
        cmocka_unit_test(test_confdiff_close_prices_differ),
        cmocka_unit_test(test_confdiff_moving_an_entry_is_no_change),
        cmocka_unit_test(test_confdiff_group_member_spelling_is_no_change),
        cmocka_unit_test(test_confdiff_groups_added_removed_changed),
        cmocka_unit_test(test_confdiff_clients_and_a_new_key_value),
        cmocka_unit_test(test_confdiff_settings_sections),
        cmocka_unit_test(test_confdiff_tls_listen_and_a_new_certificate_change_server),
        cmocka_unit_test(test_confdiff_first_load_adds_everything),
        cmocka_unit_test(test_confdiff_format_names_without_secrets),
        cmocka_unit_test(test_confdiff_out_of_memory_leaves_it_empty),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
