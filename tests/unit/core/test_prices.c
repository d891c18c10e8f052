/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_prices.c - the price table and the resolve function
 * (core/conf_prices.c): parse, each check with its code, path and value, lookup with
 * version suffixes, model_specs over the table field by field, billing free, the
 * ownership handover, out of memory, and etc/prices.yaml itself (read from the repo
 * root, where tests run).
 * Owns:    nothing beyond each test.
 * Threads: single-threaded.
 * See:     core/conf.h, core/conf_prices.c, etc/prices.yaml
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

/* ---- fixtures ---- */

static enum gw_code
parse_prices(const char *yaml, struct gw_prices **t, struct gw_conf_problems *p)
{
    memset(p, 0, sizeof(*p));
    return gw_prices_parse(yaml, strlen(yaml), t, p);
}

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

static struct gw_conf *
parse_conf(const char *yaml)
{
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;

    if (gw_conf_parse(yaml, strlen(yaml), "/etc/gw", NULL, &c, &p) != GW_OK)
        print_problems(&p);
    gw_conf_problems_fini(&p);
    assert_non_null(c);
    return c;
}

static const char table_yaml[] =
    "models:\n"
    "  - {model: zeta, input: 9}\n"
    "  - {model: gpt-4.1, input: 2.00, output: 8.00, cache_read: 0.5, cache_write: 2,\n"
    "     context_window: 1047576, max_output_tokens: 32768}\n"
    "  - {model: claude-sonnet-4, input: 3, output: 15, cache_read: 0.3, cache_write: 3.75,\n"
    "     context_window: 200000, max_output_tokens: 64000}\n"
    "  - {model: alpha}\n"
    "  - {model: gpt-4.1-mini, input: 0.4}\n";

/* ---- parse and lookup ---- */

static void
test_prices_parse_keeps_every_field_and_unknowns(void **state)
{
    struct gw_conf_problems p;
    struct gw_prices *t = NULL;
    const struct gw_price *r;

    (void)state;
    assert_int_equal(parse_prices(table_yaml, &t, &p), GW_OK);
    assert_int_equal(p.n, 0);
    assert_non_null(t);
    assert_int_equal(t->n, 5);
    r = gw_prices_find(t, "gpt-4.1");
    assert_non_null(r);
    assert_string_equal(r->model, "gpt-4.1");
    assert_true(r->input == 2.0 && r->output == 8.0 && r->cache_read == 0.5);
    assert_true(r->cache_write == 2.0);
    assert_int_equal(r->context_window, 1047576);
    assert_int_equal(r->max_output_tokens, 32768);
    r = gw_prices_find(t, "alpha");
    assert_non_null(r);
    assert_true(r->input < 0 && r->output < 0 && r->cache_read < 0 && r->cache_write < 0);
    assert_int_equal(r->context_window, 0);
    assert_int_equal(r->max_output_tokens, 0);
    /* every row is found whatever its place in the file (the table is sorted) */
    assert_non_null(gw_prices_find(t, "zeta"));
    assert_non_null(gw_prices_find(t, "gpt-4.1-mini"));
    assert_non_null(gw_prices_find(t, "claude-sonnet-4"));
    gw_prices_free(t);
}

static void
test_prices_find_strips_a_version_suffix_only_when_needed(void **state)
{
    struct gw_conf_problems p;
    struct gw_prices *t = NULL;

    (void)state;
    assert_int_equal(parse_prices(table_yaml, &t, &p), GW_OK);
    /* exact beats stripped: gpt-4.1-mini is its own row, not gpt-4.1 */
    assert_string_equal(gw_prices_find(t, "gpt-4.1-mini")->model, "gpt-4.1-mini");
    assert_string_equal(gw_prices_find(t, "gpt-4.1-2025-04-14")->model, "gpt-4.1");
    assert_string_equal(gw_prices_find(t, "claude-sonnet-4-20250514")->model, "claude-sonnet-4");
    assert_string_equal(gw_prices_find(t, "claude-sonnet-4-latest")->model, "claude-sonnet-4");
    /* not a version suffix: no match */
    assert_null(gw_prices_find(t, "gpt-4.1-turbo"));
    assert_null(gw_prices_find(t, "gpt-4.1-12345678"));
    assert_null(gw_prices_find(t, "gpt-4.1-2025-04"));
    assert_null(gw_prices_find(t, "gpt-4"));
    assert_null(gw_prices_find(t, "gpt-4.1x"));
    assert_null(gw_prices_find(t, ""));
    assert_null(gw_prices_find(NULL, "gpt-4.1"));
    gw_prices_free(t);
}

static void
test_prices_empty_document_is_an_empty_table(void **state)
{
    struct gw_conf_problems p;
    struct gw_prices *t = NULL;

    (void)state;
    assert_int_equal(parse_prices("", &t, &p), GW_OK);
    assert_non_null(t);
    assert_int_equal(t->n, 0);
    assert_null(gw_prices_find(t, "gpt-4.1"));
    gw_prices_free(t);
    assert_int_equal(parse_prices("models: []\n", &t, &p), GW_OK);
    assert_int_equal(t->n, 0);
    gw_prices_free(t);
}

/* ---- checks ---- */

struct bad_case {
    const char *yaml;
    enum gw_code code;
    const char *path;
    const char *value;
};

static const struct bad_case bad_cases[] = {
    {"models: [{input: 1}]\n", GW_E_CFG_MISSING_FIELD, "models[0].model", NULL},
    {"models: [{model: \"\", input: 1}]\n", GW_E_CFG_BAD_VALUE, "models[0].model", ""},
    {"models: [{model: \" \", input: 1}]\n", GW_E_CFG_BAD_VALUE, "models[0].model", " "},
    {"models: [{model: a}, {model: b}, {model: a, input: 2}]\n", GW_E_CFG_PRICE_DUPLICATE_MODEL,
     "models[2].model", "a"},
    {"models: [{model: a, input: -1}]\n", GW_E_CFG_RANGE, "models[0].input", "-1"},
    {"models: [{model: a, output: -0.5}]\n", GW_E_CFG_RANGE, "models[0].output", "-0.5"},
    {"models: [{model: a, cache_read: nan}]\n", GW_E_CFG_RANGE, "models[0].cache_read", "nan"},
    {"models: [{model: a, cache_write: 1000001}]\n", GW_E_CFG_RANGE, "models[0].cache_write",
     "1e+06"},
    {"models: [{model: a, context_window: 0}]\n", GW_E_CFG_RANGE, "models[0].context_window", "0"},
    {"models: [{model: a, max_output_tokens: -3}]\n", GW_E_CFG_RANGE, "models[0].max_output_tokens",
     "-3"},
    {"models: [{model: a, max_output_tokens: 100000001}]\n", GW_E_CFG_RANGE,
     "models[0].max_output_tokens", "100000001"},
    {"models: [{model: a, input: cheap}]\n", GW_E_CFG_WRONG_TYPE, "models[0].input", "cheap"},
    {"models: [{model: a, price: 1}]\n", GW_E_CFG_UNKNOWN_FIELD, "models[0].price", "price"},
    {"prices: []\n", GW_E_CFG_UNKNOWN_FIELD, "prices", "prices"},
    {"models: [{model: a}\n", GW_E_CFG_SYNTAX, "(document)", NULL},
};

static void
test_prices_each_bad_value_gets_its_code_path_and_value(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *b = &bad_cases[i];
        struct gw_conf_problems p;
        struct gw_prices *t = (struct gw_prices *)1;
        enum gw_code rc = parse_prices(b->yaml, &t, &p);

        if (!has_problem(&p, b->code, b->path, b->value)) {
            print_message("case %zu: expected %s at %s = %s\n%s", i, gw_code_str(b->code), b->path,
                          b->value ? b->value : "*", b->yaml);
            print_problems(&p);
            fail();
        }
        assert_int_not_equal(rc, GW_OK);
        assert_int_equal(rc, p.v[0].code);
        assert_null(t);
        gw_conf_problems_fini(&p);
    }
}

static void
test_prices_reports_every_problem_at_once(void **state)
{
    static const char yaml[] = "models:\n"
                               "  - {model: a, input: -1, context_window: 0}\n"
                               "  - {output: 2}\n"
                               "  - {model: a}\n";
    struct gw_conf_problems p;
    struct gw_prices *t;

    (void)state;
    assert_int_equal(parse_prices(yaml, &t, &p), GW_E_CFG_RANGE);
    assert_null(t);
    assert_int_equal(p.n, 4);
    assert_true(has_problem(&p, GW_E_CFG_RANGE, "models[0].input", "-1"));
    assert_true(has_problem(&p, GW_E_CFG_RANGE, "models[0].context_window", "0"));
    assert_true(has_problem(&p, GW_E_CFG_MISSING_FIELD, "models[1].model", NULL));
    assert_true(has_problem(&p, GW_E_CFG_PRICE_DUPLICATE_MODEL, "models[2].model", "a"));
    gw_conf_problems_fini(&p);
}

static void
test_prices_zero_prices_are_allowed(void **state)
{
    struct gw_conf_problems p;
    struct gw_prices *t;
    const struct gw_price *r;

    (void)state;
    assert_int_equal(parse_prices("models: [{model: free-model, input: 0, output: 0}]\n", &t, &p),
                     GW_OK);
    r = gw_prices_find(t, "free-model");
    assert_non_null(r);
    assert_true(r->input == 0 && r->output == 0);
    gw_prices_free(t);
}

/* ---- resolve ---- */

#define PROV(name, extra)                                                                          \
    "  - {name: " name ", dialect: openai, base_url: \"http://h\", keys: [{value: v}], "           \
    "models: [\"*\"]" extra "}\n"

static void
test_prices_model_specs_win_field_by_field(void **state)
{
    static const char yaml[] =
        "server: {listen: [\"127.0.0.1:8080\"]}\n"
        "providers:\n" PROV("own", ", model_specs: {gpt-4.1: {input: 1.5, context_window: 1000}}")
            PROV("plain", "");
    struct gw_conf_problems p;
    struct gw_prices *t = NULL;
    struct gw_conf *c = parse_conf(yaml);
    struct gw_model_spec s;

    (void)state;
    assert_int_equal(parse_prices(table_yaml, &t, &p), GW_OK);
    assert_int_equal(gw_conf_set_prices(c, &t), GW_OK);
    assert_null(t);

    gw_conf_model_spec(c, &c->providers[0], "gpt-4.1", &s);
    assert_true(s.input_known && s.input == 1.5);   /* model_specs */
    assert_true(s.output_known && s.output == 8.0); /* table */
    assert_true(s.cache_read_known && s.cache_read == 0.5);
    assert_true(s.cache_write_known && s.cache_write == 2.0);
    assert_true(s.context_window_known);
    assert_int_equal(s.context_window, 1000); /* model_specs */
    assert_true(s.max_output_tokens_known);
    assert_int_equal(s.max_output_tokens, 32768); /* table */

    /* the dated id finds both the spec and the row */
    gw_conf_model_spec(c, &c->providers[0], "gpt-4.1-2025-04-14", &s);
    assert_true(s.input == 1.5 && s.output == 8.0);

    gw_conf_model_spec(c, &c->providers[1], "gpt-4.1", &s);
    assert_true(s.input_known && s.input == 2.0);
    assert_int_equal(s.context_window, 1047576);

    /* no provider: the table alone */
    gw_conf_model_spec(c, NULL, "claude-sonnet-4-20250514", &s);
    assert_true(s.input == 3.0 && s.cache_write == 3.75);
    assert_int_equal(s.max_output_tokens, 64000);

    /* a row with some fields leaves the others unknown */
    gw_conf_model_spec(c, &c->providers[1], "gpt-4.1-mini", &s);
    assert_true(s.input_known && s.input == 0.4);
    assert_false(s.output_known);
    assert_false(s.context_window_known);
    assert_int_equal(s.context_window, 0);

    /* nothing known */
    gw_conf_model_spec(c, &c->providers[1], "mystery", &s);
    assert_false(s.input_known || s.output_known || s.cache_read_known || s.cache_write_known);
    assert_false(s.context_window_known || s.max_output_tokens_known);
    assert_true(gw_conf_price_input(c, &c->providers[1], "mystery") < 0);
    assert_true(gw_conf_price_input(c, &c->providers[0], "gpt-4.1") == 1.5);
    assert_true(gw_conf_price_input(c, &c->providers[1], "gpt-4.1") == 2.0);
    gw_conf_free(c);
}

static void
test_prices_model_specs_alone_without_a_table(void **state)
{
    static const char yaml[] =
        "server: {listen: [\"127.0.0.1:8080\"]}\n"
        "providers:\n" PROV("own", ", model_specs: {local: {output: 0.5, max_output_tokens: 77}}");
    struct gw_conf *c = parse_conf(yaml);
    struct gw_model_spec s;

    (void)state;
    assert_null(c->prices);
    gw_conf_model_spec(c, &c->providers[0], "local", &s);
    assert_false(s.input_known);
    assert_true(s.output_known && s.output == 0.5);
    assert_true(s.max_output_tokens_known);
    assert_int_equal(s.max_output_tokens, 77);
    assert_true(gw_conf_price_input(c, &c->providers[0], "local") < 0);
    gw_conf_free(c);
}

static void
test_prices_billing_free_costs_zero_and_keeps_windows(void **state)
{
    static const char yaml[] =
        "server: {listen: [\"127.0.0.1:8080\"]}\n"
        "providers:\n" PROV("gift", ", billing: free, model_specs: {gpt-4.1: {input: 5}}");
    struct gw_conf_problems p;
    struct gw_prices *t = NULL;
    struct gw_conf *c = parse_conf(yaml);
    struct gw_model_spec s;

    (void)state;
    assert_int_equal(parse_prices(table_yaml, &t, &p), GW_OK);
    gw_conf_set_prices(c, &t);
    gw_conf_model_spec(c, &c->providers[0], "gpt-4.1", &s);
    assert_true(s.input_known && s.output_known && s.cache_read_known && s.cache_write_known);
    assert_true(s.input == 0 && s.output == 0 && s.cache_read == 0 && s.cache_write == 0);
    assert_int_equal(s.context_window, 1047576);
    /* free even for a model nobody priced */
    assert_true(gw_conf_price_input(c, &c->providers[0], "mystery") == 0);
    assert_true(gw_conf_price_input(c, &c->providers[0], "gpt-4.1") == 0);
    gw_conf_free(c);
}

static void
test_prices_set_replaces_the_table_and_takes_ownership(void **state)
{
    struct gw_conf_problems p;
    struct gw_prices *t1 = NULL, *t2 = NULL;
    struct gw_conf *c =
        parse_conf("server: {listen: [\"127.0.0.1:8080\"]}\nproviders:\n" PROV("a", ""));

    (void)state;
    assert_int_equal(parse_prices(table_yaml, &t1, &p), GW_OK);
    assert_int_equal(parse_prices("models: [{model: gpt-4.1, input: 7}]\n", &t2, &p), GW_OK);
    gw_conf_set_prices(c, &t1);
    assert_null(t1);
    assert_true(gw_conf_price_input(c, &c->providers[0], "gpt-4.1") == 2.0);
    gw_conf_set_prices(c, &t2); /* the first table is freed here (ASan/valgrind would see) */
    assert_null(t2);
    assert_true(gw_conf_price_input(c, &c->providers[0], "gpt-4.1") == 7.0);
    gw_conf_set_prices(c, &t2); /* NULL: no table */
    assert_null(c->prices);
    assert_true(gw_conf_price_input(c, &c->providers[0], "gpt-4.1") < 0);
    gw_conf_free(c);
}

/* ---- etc/prices.yaml ---- */

static void
test_prices_loads_etc_prices_yaml_with_every_listed_model(void **state)
{
    static const char *const want[] = {"gpt-4.1",           "gpt-4.1-mini",
                                       "gpt-4.1-nano",      "gpt-4o",
                                       "gpt-4o-mini",       "o3",
                                       "o4-mini",           "gpt-5",
                                       "gpt-5-mini",        "gpt-5-nano",
                                       "claude-opus-4-1",   "claude-opus-4",
                                       "claude-sonnet-4-5", "claude-sonnet-4",
                                       "claude-3-7-sonnet", "claude-haiku-4-5",
                                       "claude-3-5-haiku",  "gemini-2.5-pro",
                                       "gemini-2.5-flash",  "gemini-2.5-flash-lite",
                                       "gemini-2.0-flash",  NULL};
    struct gw_conf_problems p = {0};
    struct gw_prices *t = NULL;
    const struct gw_price *r;
    size_t len = 0, i;
    char *yaml = read_file("etc/prices.yaml", &len);

    (void)state;
    assert_non_null(yaml);
    if (gw_prices_parse(yaml, len, &t, &p) != GW_OK)
        print_problems(&p);
    assert_non_null(t);
    for (i = 0; want[i]; i++) {
        r = gw_prices_find(t, want[i]);
        if (!r)
            print_message("missing: %s\n", want[i]);
        assert_non_null(r);
        assert_string_equal(r->model, want[i]);
        assert_true(r->input > 0 && r->output > r->input && r->cache_read > 0);
        assert_true(r->cache_read < r->input && r->cache_write >= r->input);
        assert_true(r->context_window >= 128000);
        assert_true(r->max_output_tokens > 0 && r->max_output_tokens <= r->context_window);
    }
    /* a dated Anthropic id and an OpenAI snapshot resolve to their family rows */
    assert_string_equal(gw_prices_find(t, "claude-sonnet-4-5-20250929")->model,
                        "claude-sonnet-4-5");
    assert_string_equal(gw_prices_find(t, "claude-3-5-haiku-20241022")->model, "claude-3-5-haiku");
    assert_string_equal(gw_prices_find(t, "gpt-4o-2024-08-06")->model, "gpt-4o");
    r = gw_prices_find(t, "gpt-4.1");
    assert_true(r->input == 2.0 && r->output == 8.0);
    gw_prices_free(t);
    free(yaml);
}

/* ---- out of memory ---- */

static void
test_prices_every_allocation_failure_ends_cleanly(void **state)
{
    static const char *const inputs[] = {table_yaml, "models: [{model: a, input: -1}]\n",
                                         "models: [{model: a, bogus: 1}]\n"};
    static const enum gw_code want[] = {GW_OK, GW_E_CFG_RANGE, GW_E_CFG_UNKNOWN_FIELD};
    size_t k;

    (void)state;
    for (k = 0; k < 3; k++) {
        enum gw_code rc = GW_E_NOMEM;
        unsigned long n;

        for (n = 1; n < 5000 && rc == GW_E_NOMEM; n++) {
            struct gw_conf_problems p = {0};
            struct gw_prices *t = NULL;

            gw_alloc_fail_at(n);
            rc = gw_prices_parse(inputs[k], strlen(inputs[k]), &t, &p);
            gw_alloc_fail_at(0);
            if (rc == GW_E_NOMEM) {
                assert_null(t);
                assert_int_equal(p.n, 0);
            } else {
                assert_int_equal(rc, want[k]);
            }
            gw_prices_free(t);
            gw_conf_problems_fini(&p);
        }
        assert_int_equal(rc, want[k]);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prices_parse_keeps_every_field_and_unknowns),
        cmocka_unit_test(test_prices_find_strips_a_version_suffix_only_when_needed),
        cmocka_unit_test(test_prices_empty_document_is_an_empty_table),
        cmocka_unit_test(test_prices_each_bad_value_gets_its_code_path_and_value),
        cmocka_unit_test(test_prices_reports_every_problem_at_once),
        cmocka_unit_test(test_prices_zero_prices_are_allowed),
        cmocka_unit_test(test_prices_model_specs_win_field_by_field),
        cmocka_unit_test(test_prices_model_specs_alone_without_a_table),
        cmocka_unit_test(test_prices_billing_free_costs_zero_and_keeps_windows),
        cmocka_unit_test(test_prices_set_replaces_the_table_and_takes_ownership),
        cmocka_unit_test(test_prices_loads_etc_prices_yaml_with_every_listed_model),
        cmocka_unit_test(test_prices_every_allocation_failure_ends_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
