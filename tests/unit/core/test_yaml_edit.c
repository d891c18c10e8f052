/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_yaml_edit.c - gw_yaml_set_model_spec: insert, replace and remove
 * one providers[].model_specs entry in block and flow styles; every byte outside the
 * entry stays (comments, blank lines, CRLF, multi-byte characters); refusals with
 * their codes; and each edited text, parsed by gw_conf_parse, holds exactly the spec
 * asked for.
 * Owns:    nothing beyond each test.
 * Threads: single-threaded.
 * See:     core/yaml_edit.h, core/yaml_edit.c
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
#include "core/str.h"
#include "core/yaml_edit.h"

/* ---- fixtures ---- */

static const char *
no_env(void *arg, const char *name)
{
    (void)arg;
    (void)name;
    return NULL;
}

static void
fake_sha256(const void *data, size_t len, unsigned char out[32])
{
    const unsigned char *d = data;
    size_t i;

    memset(out, 0, 32);
    for (i = 0; i < len; i++)
        out[i % 32] ^= (unsigned char)(d[i] + i * 7 + len);
}

static const struct gw_conf_env env = {no_env, fake_sha256, NULL, NULL, NULL};

static const struct gw_yaml_spec_edit SET_BOTH = {GW_YAML_SET, 128000, GW_YAML_SET, 4096};
static const struct gw_yaml_spec_edit REMOVE_BOTH = {GW_YAML_REMOVE, 0, GW_YAML_REMOVE, 0};

/* Runs the edit; asserts <want>; returns the new text (static until the next call). */
static const char *
edit_ok(const char *yaml, const char *prov, const char *model, const struct gw_yaml_spec_edit *e)
{
    static struct gw_buf out;
    char why[256];
    enum gw_code rc;

    gw_buf_fini(&out);
    rc = gw_yaml_set_model_spec(yaml, strlen(yaml), prov, model, e, &out, why, sizeof(why));
    if (rc != GW_OK)
        fail_msg("edit refused: %s (%s)", gw_code_str(rc), why);
    return out.data ? out.data : "";
}

static enum gw_code
edit_code(const char *yaml, const char *prov, const char *model, const struct gw_yaml_spec_edit *e,
          char *why, size_t whylen)
{
    struct gw_buf out = {0};
    enum gw_code rc;

    rc = gw_yaml_set_model_spec(yaml, strlen(yaml), prov, model, e, &out, why, whylen);
    assert_int_equal(out.len, 0); /* an error leaves no text */
    gw_buf_fini(&out);
    return rc;
}

/* Parses <yaml> as gwd would and checks provider <prov>'s entry for <model>: absent when
 * <present> is false, else with <cw>/<mo> (0 = field absent) and <input> (< 0 = absent). */
static void
assert_spec(const char *yaml, const char *prov, const char *model, bool present, uint64_t cw,
            uint64_t mo, double input)
{
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    const struct gw_conf_provider *pv;
    const struct gw_conf_model_spec *s = NULL;
    struct gw_buf text = {0};
    enum gw_code rc;
    size_t i;

    /* a listen address is required: add one to texts that have no server section */
    if (!strstr(yaml, "server:"))
        assert_int_equal(gw_buf_append_cstr(&text, "server: {listen: [\"127.0.0.1:1\"]}\n"), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&text, yaml), GW_OK);
    rc = gw_conf_parse(text.data, text.len, "/etc/gw", &env, &c, &p);
    if (rc != GW_OK) {
        char line[512] = "";

        if (p.n)
            gw_conf_problem_format(&p.v[0], line, sizeof(line));
        fail_msg("the edited config is refused: %s\n%s", line, yaml);
    }
    pv = gw_conf_provider_find(c, prov, strlen(prov));
    assert_non_null(pv);
    for (i = 0; i < pv->n_model_specs; i++)
        if (strcmp(pv->model_specs[i].model, model) == 0)
            s = &pv->model_specs[i];
    if (!present) {
        assert_null(s);
    } else {
        assert_non_null(s);
        assert_int_equal(s->context_window, cw);
        assert_int_equal(s->max_output_tokens, mo);
        if (input < 0)
            assert_true(s->input < 0);
        else
            assert_true(s->input == input);
    }
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    gw_buf_fini(&text);
}

/* <got> equals <orig> outside [<a>, <a> + <orig_n>) of <orig>, replaced by
 * <got_n> bytes in <got>: same prefix and suffix. */
static void
assert_same_outside(const char *orig, const char *got, const char *marker_before,
                    const char *marker_after)
{
    const char *p = strstr(orig, marker_before), *q = strstr(orig, marker_after);
    size_t pre, suf;

    assert_non_null(p);
    assert_non_null(q);
    pre = (size_t)(p - orig) + strlen(marker_before);
    suf = strlen(q);
    assert_true(strlen(got) >= pre + suf);
    assert_memory_equal(got, orig, pre);
    assert_memory_equal(got + strlen(got) - suf, q, suf);
}

#define HEAD                                                                                       \
    "# gw config\n"                                                                                \
    "server:\n"                                                                                    \
    "  listen: [\"127.0.0.1:8080\"]   # data plane\n"                                              \
    "\n"

/* ---- block style ---- */

static const char BLOCK[] = HEAD "providers:\n"
                                 "  - name: a\n    dialect: openai\n"
                                 "    base_url: http://127.0.0.1:9000\n"
                                 "    keys: [{value: k}]\n"
                                 "    models: [\"*\"]   # every model\n"
                                 "\n"
                                 "  # the second one\n"
                                 "  - name: b\n    dialect: openai\n"
                                 "    base_url: http://127.0.0.1:9001\n"
                                 "    keys:\n"
                                 "      - value: k2\n"
                                 "    models: [m1]\n"
                                 "# tail comment\n";

static void
test_yaml_edit_block_provider_without_specs_gets_a_model_specs_line(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK, "a", "gpt-4.1", &SET_BOTH);
    assert_string_equal(got, HEAD "providers:\n"
                                  "  - name: a\n    dialect: openai\n"
                                  "    base_url: http://127.0.0.1:9000\n"
                                  "    keys: [{value: k}]\n"
                                  "    models: [\"*\"]   # every model\n"
                                  "    model_specs: {\"gpt-4.1\": {context_window: 128000, "
                                  "max_output_tokens: 4096}}\n"
                                  "\n"
                                  "  # the second one\n"
                                  "  - name: b\n    dialect: openai\n"
                                  "    base_url: http://127.0.0.1:9001\n"
                                  "    keys:\n"
                                  "      - value: k2\n"
                                  "    models: [m1]\n"
                                  "# tail comment\n");
    assert_spec(got, "a", "gpt-4.1", true, 128000, 4096, -1);
}

static void
test_yaml_edit_block_last_provider_nested_last_key(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK, "b", "m1", &SET_BOTH);
    assert_same_outside(BLOCK, got, "    models: [m1]\n", "# tail comment\n");
    assert_non_null(strstr(got, "    models: [m1]\n    model_specs: {\"m1\": "));
    assert_spec(got, "b", "m1", true, 128000, 4096, -1);
    assert_spec(got, "a", "m1", false, 0, 0, -1);
}

static void
test_yaml_edit_insert_then_remove_gives_back_the_file(void **state)
{
    char *once;

    (void)state;
    once = strdup(edit_ok(BLOCK, "a", "m", &SET_BOTH));
    assert_string_equal(edit_ok(once, "a", "m", &REMOVE_BOTH), BLOCK);
    free(once);
    once = strdup(edit_ok(BLOCK, "b", "m", &SET_BOTH));
    assert_string_equal(edit_ok(once, "b", "m", &REMOVE_BOTH), BLOCK);
    free(once);
}

static const char BLOCK_SPECS[] = HEAD "providers:\n"
                                       "  - name: a\n    dialect: openai\n"
                                       "    base_url: http://127.0.0.1:9000\n"
                                       "    keys: [{value: k}]\n"
                                       "    models: [\"*\"]\n"
                                       "    model_specs:\n"
                                       "      # the big one\n"
                                       "      m1:\n"
                                       "        context_window: 1000   # old\n"
                                       "        input: 2.5\n"
                                       "      'm2': {max_output_tokens: 77}\n"
                                       "    billing: metered\n"
                                       "# end\n";

static void
test_yaml_edit_block_entry_is_rewritten_keeping_its_prices(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK_SPECS, "a", "m1", &SET_BOTH);
    assert_string_equal(got, HEAD "providers:\n"
                                  "  - name: a\n    dialect: openai\n"
                                  "    base_url: http://127.0.0.1:9000\n"
                                  "    keys: [{value: k}]\n"
                                  "    models: [\"*\"]\n"
                                  "    model_specs:\n"
                                  "      # the big one\n"
                                  "      m1: {context_window: 128000, input: 2.5, "
                                  "max_output_tokens: 4096}\n"
                                  "      'm2': {max_output_tokens: 77}\n"
                                  "    billing: metered\n"
                                  "# end\n");
    assert_spec(got, "a", "m1", true, 128000, 4096, 2.5);
    assert_spec(got, "a", "m2", true, 0, 77, -1);
}

static void
test_yaml_edit_keep_leaves_the_other_field(void **state)
{
    const struct gw_yaml_spec_edit only_mo = {GW_YAML_KEEP, 0, GW_YAML_SET, 512};
    const struct gw_yaml_spec_edit drop_cw = {GW_YAML_REMOVE, 0, GW_YAML_KEEP, 0};
    const char *got;

    (void)state;
    got = edit_ok(BLOCK_SPECS, "a", "m1", &only_mo);
    assert_spec(got, "a", "m1", true, 1000, 512, 2.5);
    got = edit_ok(BLOCK_SPECS, "a", "m1", &drop_cw);
    assert_spec(got, "a", "m1", true, 0, 0, 2.5); /* the price keeps the entry */
    got = edit_ok(BLOCK_SPECS, "a", "m2", &only_mo);
    assert_same_outside(BLOCK_SPECS, got, "      'm2': ", "\n    billing: metered\n");
    assert_spec(got, "a", "m2", true, 0, 512, -1);
}

static void
test_yaml_edit_block_new_model_goes_on_its_own_line(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK_SPECS, "a", "new/model", &SET_BOTH);
    assert_same_outside(BLOCK_SPECS, got, "      'm2': {max_output_tokens: 77}\n",
                        "    billing: metered\n");
    assert_non_null(strstr(got, "77}\n      \"new/model\": {context_window: 128000, "
                                "max_output_tokens: 4096}\n    billing"));
    assert_spec(got, "a", "new/model", true, 128000, 4096, -1);
    assert_spec(got, "a", "m1", true, 1000, 0, 2.5);
}

static void
test_yaml_edit_block_remove_takes_the_entry_lines_only(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK_SPECS, "a", "m2", &REMOVE_BOTH);
    assert_string_equal(got, HEAD "providers:\n"
                                  "  - name: a\n    dialect: openai\n"
                                  "    base_url: http://127.0.0.1:9000\n"
                                  "    keys: [{value: k}]\n"
                                  "    models: [\"*\"]\n"
                                  "    model_specs:\n"
                                  "      # the big one\n"
                                  "      m1:\n"
                                  "        context_window: 1000   # old\n"
                                  "        input: 2.5\n"
                                  "    billing: metered\n"
                                  "# end\n");
    assert_spec(got, "a", "m2", false, 0, 0, -1);
}

static void
test_yaml_edit_removing_the_last_entry_removes_model_specs(void **state)
{
    static const char one[] = HEAD "providers:\n"
                                   "  - name: a\n    dialect: openai\n"
                                   "    base_url: http://127.0.0.1:9000\n"
                                   "    model_specs:\n"
                                   "      m1: {context_window: 5}\n"
                                   "    keys: [{value: k}]\n"
                                   "    models: [\"*\"]\n";
    const char *got;

    (void)state;
    got = edit_ok(one, "a", "m1", &REMOVE_BOTH);
    assert_string_equal(got, HEAD "providers:\n"
                                  "  - name: a\n    dialect: openai\n"
                                  "    base_url: http://127.0.0.1:9000\n"
                                  "    keys: [{value: k}]\n"
                                  "    models: [\"*\"]\n");
    assert_spec(got, "a", "m1", false, 0, 0, -1);
}

static void
test_yaml_edit_removing_an_absent_entry_changes_nothing(void **state)
{
    (void)state;
    assert_string_equal(edit_ok(BLOCK, "a", "nope", &REMOVE_BOTH), BLOCK);
    assert_string_equal(edit_ok(BLOCK_SPECS, "a", "nope", &REMOVE_BOTH), BLOCK_SPECS);
}

/* ---- flow style ---- */

static const char FLOW[] =
    "providers:\n"
    "  - {name: a, dialect: openai, base_url: \"http://127.0.0.1:9000\", keys: [{value: k}],\n"
    "     models: [\"*\"]}   # flow\n"
    "  - {name: b, dialect: openai, base_url: \"http://127.0.0.1:9001\", keys: [{value: k}],"
    " models: [\"*\"],\n"
    "     model_specs: {m1: {context_window: 10}, m2: {input: 1.0},"
    " m3: {max_output_tokens: 3}}}\n";

static void
test_yaml_edit_flow_provider_gets_model_specs_before_its_brace(void **state)
{
    const char *got;
    char *once;

    (void)state;
    got = edit_ok(FLOW, "a", "m", &SET_BOTH);
    assert_string_equal(
        got, "providers:\n"
             "  - {name: a, dialect: openai, base_url: \"http://127.0.0.1:9000\", keys: "
             "[{value: k}],\n"
             "     models: [\"*\"], model_specs: {\"m\": {context_window: 128000, "
             "max_output_tokens: 4096}}}   # flow\n"
             "  - {name: b, dialect: openai, base_url: \"http://127.0.0.1:9001\", keys: [{value: "
             "k}], models: [\"*\"],\n"
             "     model_specs: {m1: {context_window: 10}, m2: {input: 1.0}, m3: "
             "{max_output_tokens: 3}}}\n");
    assert_spec(got, "a", "m", true, 128000, 4096, -1);
    once = strdup(got); /* edit_ok's buffer is reused by the next call */
    assert_string_equal(edit_ok(once, "a", "m", &REMOVE_BOTH), FLOW);
    free(once);
}

static void
test_yaml_edit_flow_specs_replace_add_and_remove(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(FLOW, "b", "m2", &SET_BOTH);
    assert_non_null(strstr(got,
                           "{m1: {context_window: 10}, m2: {input: 1.0, context_window: "
                           "128000, max_output_tokens: 4096}, m3: {max_output_tokens: 3}}}\n"));
    assert_spec(got, "b", "m2", true, 128000, 4096, 1.0);

    got = edit_ok(FLOW, "b", "m4", &SET_BOTH);
    assert_non_null(strstr(got, "m3: {max_output_tokens: 3}, \"m4\": {context_window: 128000, "
                                "max_output_tokens: 4096}}}\n"));
    assert_spec(got, "b", "m4", true, 128000, 4096, -1);

    got = edit_ok(FLOW, "b", "m1", &REMOVE_BOTH);
    assert_non_null(strstr(got, "model_specs: {m2: {input: 1.0}, m3: {max_output_tokens: 3}}}\n"));
    assert_spec(got, "b", "m1", false, 0, 0, -1);

    got = edit_ok(FLOW, "b", "m3", &REMOVE_BOTH);
    assert_non_null(strstr(got, "model_specs: {m1: {context_window: 10}, m2: {input: 1.0}}}\n"));
    assert_spec(got, "b", "m3", false, 0, 0, -1);
    assert_spec(got, "b", "m1", true, 10, 0, -1);
}

static void
test_yaml_edit_flow_empty_specs_mapping_gets_the_entry(void **state)
{
    static const char y[] =
        "providers: [{name: a, dialect: openai, base_url: \"http://h:1\", keys: [{value: k}], "
        "models: [\"*\"], model_specs: {}}]\n";
    const char *got;

    (void)state;
    got = edit_ok(y, "a", "m", &SET_BOTH);
    assert_string_equal(
        got, "providers: [{name: a, dialect: openai, base_url: \"http://h:1\", keys: [{value: k}], "
             "models: [\"*\"], model_specs: {\"m\": {context_window: 128000, "
             "max_output_tokens: 4096}}}]\n");
    assert_spec(got, "a", "m", true, 128000, 4096, -1);
}

/* ---- bytes ---- */

static void
test_yaml_edit_crlf_file_gets_crlf_lines(void **state)
{
    static const char y[] =
        "# crlf\r\nproviders:\r\n  - name: a\r\n    dialect: openai\r\n    base_url: http://h:1\r\n"
        "    keys: [{value: k}]\r\n    models: [\"*\"]\r\n# end\r\n";
    const char *got;
    char *once;

    (void)state;
    got = edit_ok(y, "a", "m", &SET_BOTH);
    assert_string_equal(
        got,
        "# crlf\r\nproviders:\r\n  - name: a\r\n    dialect: openai\r\n    base_url: http://h:1\r\n"
        "    keys: [{value: k}]\r\n    models: [\"*\"]\r\n"
        "    model_specs: {\"m\": {context_window: 128000, "
        "max_output_tokens: 4096}}\r\n# end\r\n");
    assert_spec(got, "a", "m", true, 128000, 4096, -1);
    once = strdup(got);
    assert_string_equal(edit_ok(once, "a", "m", &REMOVE_BOTH), y);
    free(once);
}

static void
test_yaml_edit_multibyte_characters_before_the_entry_keep_positions(void **state)
{
    static const char y[] = "# Überblick: 日本語のコメント\n"
                            "providers:\n"
                            "  - name: a   # café\n    dialect: openai\n"
                            "    base_url: http://h:1\n"
                            "    keys: [{value: \"clé\"}]\n"
                            "    models: [\"modèle-ü\"]\n"
                            "    model_specs: {\"modèle-ü\": {context_window: 9}}\n"
                            "# fin ✓\n";
    const char *got;

    (void)state;
    got = edit_ok(y, "a", "modèle-ü", &SET_BOTH);
    assert_same_outside(y, got, "    model_specs: {\"modèle-ü\": ", "}\n# fin ✓\n");
    assert_spec(got, "a", "modèle-ü", true, 128000, 4096, -1);
}

static void
test_yaml_edit_byte_order_mark_is_kept(void **state)
{
    static const char y[] =
        "\xEF\xBB\xBFproviders:\n  - name: a\n    dialect: openai\n    base_url: http://h:1\n"
        "    keys: [{value: k}]\n    models: [\"*\"]\n";
    const char *got;

    (void)state;
    got = edit_ok(y, "a", "m", &SET_BOTH);
    assert_memory_equal(got, y, strlen(y));
    assert_string_equal(got + strlen(y), "    model_specs: {\"m\": {context_window: 128000, "
                                         "max_output_tokens: 4096}}\n");
}

static void
test_yaml_edit_file_without_final_newline(void **state)
{
    static const char y[] =
        "providers:\n  - name: a\n    dialect: openai\n    base_url: http://h:1\n"
        "    keys: [{value: k}]\n    models: [\"*\"]";
    const char *got;

    (void)state;
    got = edit_ok(y, "a", "m", &SET_BOTH);
    assert_string_equal(got,
                        "providers:\n  - name: a\n    dialect: openai\n    base_url: http://h:1\n"
                        "    keys: [{value: k}]\n    models: [\"*\"]\n"
                        "    model_specs: {\"m\": {context_window: 128000, "
                        "max_output_tokens: 4096}}\n");
    assert_spec(got, "a", "m", true, 128000, 4096, -1);
}

static void
test_yaml_edit_model_id_with_quotes_is_escaped(void **state)
{
    const char *got;

    (void)state;
    got = edit_ok(BLOCK, "a", "we\"ird: m#1", &SET_BOTH);
    assert_non_null(strstr(got, "model_specs: {\"we\\\"ird: m#1\": {"));
    assert_spec(got, "a", "we\"ird: m#1", true, 128000, 4096, -1);
}

/* A block scalar's text ends after its trailing line breaks (with `|+` they are part of
 * its value), so the new line goes after them. */
static void
test_yaml_edit_block_scalar_last_value_keeps_its_trailing_lines(void **state)
{
    static const char y[] = "providers:\n"
                            "  - name: a\n"
                            "    dialect: openai\n"
                            "    base_url: http://h:1\n"
                            "    keys: [{value: k}]\n"
                            "    models:\n"
                            "      - m\n"
                            "    billing: |\n"
                            "      metered\n"
                            "\n"
                            "# after\n";
    const char *got;

    (void)state;
    got = edit_ok(y, "a", "m", &SET_BOTH);
    assert_string_equal(got, "providers:\n"
                             "  - name: a\n"
                             "    dialect: openai\n"
                             "    base_url: http://h:1\n"
                             "    keys: [{value: k}]\n"
                             "    models:\n"
                             "      - m\n"
                             "    billing: |\n"
                             "      metered\n"
                             "\n"
                             "    model_specs: {\"m\": {context_window: 128000, "
                             "max_output_tokens: 4096}}\n"
                             "# after\n");
}

static void
test_yaml_edit_refuses_to_remove_a_key_sharing_its_line(void **state)
{
    static const char y[] = "providers:\n"
                            "  - model_specs: {m: {context_window: 5}}\n"
                            "    name: a\n";
    char why[256];

    (void)state;
    assert_int_equal(edit_code(y, "a", "m", &REMOVE_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_non_null(strstr(why, "line"));
    /* replacing the value in place works there */
    assert_non_null(strstr(edit_ok(y, "a", "m", &SET_BOTH),
                           "  - model_specs: {m: {context_window: 128000, max_output_tokens: "
                           "4096}}\n    name: a\n"));
}

/* ---- refusals ---- */

static void
test_yaml_edit_refuses_bad_values_with_config_codes(void **state)
{
    const struct gw_yaml_spec_edit zero = {GW_YAML_SET, 0, GW_YAML_KEEP, 0};
    const struct gw_yaml_spec_edit big = {GW_YAML_KEEP, 0, GW_YAML_SET, 100000001};
    char why[256];

    (void)state;
    assert_int_equal(edit_code(BLOCK, "a", "m", &zero, why, sizeof(why)), GW_E_CFG_MODEL_SPEC_ZERO);
    assert_non_null(strstr(why, "context_window"));
    assert_int_equal(edit_code(BLOCK, "a", "m", &big, why, sizeof(why)), GW_E_CFG_RANGE);
    assert_int_equal(edit_code(BLOCK, "a", " ", &SET_BOTH, why, sizeof(why)),
                     GW_E_CFG_MODEL_SPEC_BLANK_MODEL);
    assert_int_equal(edit_code(BLOCK, "a", "", &SET_BOTH, why, sizeof(why)),
                     GW_E_CFG_MODEL_SPEC_BLANK_MODEL);
    assert_int_equal(edit_code(BLOCK, "a", "*", &SET_BOTH, why, sizeof(why)),
                     GW_E_CFG_MODEL_SPEC_WILDCARD);
}

static void
test_yaml_edit_unknown_provider(void **state)
{
    char why[256];

    (void)state;
    assert_int_equal(edit_code(BLOCK, "zz", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_PROVIDER);
    assert_non_null(strstr(why, "zz"));
    assert_int_equal(edit_code("", "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_PROVIDER);
    assert_int_equal(edit_code("server: {}\n", "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_PROVIDER);
}

static void
test_yaml_edit_refuses_anchors_in_the_provider_but_not_elsewhere(void **state)
{
    static const char in_entry[] = "providers:\n"
                                   "  - name: a\n    dialect: openai\n"
                                   "    keys: &k [{value: k}]\n"
                                   "    models: [\"*\"]\n"
                                   "  - name: b\n    dialect: openai\n"
                                   "    keys: *k\n";
    static const char alias_in_entry[] = "x: &u http://h:1\n"
                                         "providers:\n"
                                         "  - name: a\n    dialect: openai\n"
                                         "    base_url: *u\n";
    static const char provider_is_alias[] =
        "x: &p {name: a, dialect: openai, base_url: \"http://h:1\"}\n"
        "providers: [*p]\n";
    char why[256];

    (void)state;
    assert_int_equal(edit_code(in_entry, "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_non_null(strstr(why, "anchor"));
    assert_int_equal(edit_code(in_entry, "b", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_int_equal(edit_code(alias_in_entry, "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_int_equal(edit_code(provider_is_alias, "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    /* an anchor in another provider does not stop an edit of this one */
    edit_ok("providers:\n  - name: a\n    dialect: openai\n    models: [m]\n  - name: b\n    "
            "dialect: openai\n    keys: &k [{value: k}]\n",
            "a", "m", &SET_BOTH);
}

static void
test_yaml_edit_refuses_several_documents_and_syntax_errors(void **state)
{
    char why[256];

    (void)state;
    assert_int_equal(edit_code("providers:\n  - name: a\n    dialect: openai\n---\nproviders: []\n",
                               "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_non_null(strstr(why, "document"));
    assert_int_equal(edit_code("providers: [\n", "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_non_null(strstr(why, "YAML"));
    assert_int_equal(
        edit_code(
            "providers:\n  - name: a\n    dialect: openai\n  - name: a\n    dialect: openai\n", "a",
            "m", &SET_BOTH, why, sizeof(why)),
        GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_int_equal(edit_code("providers:\n  - name: a\n    dialect: openai\n    model_specs: 5\n",
                               "a", "m", &SET_BOTH, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
}

/* ---- out of memory ---- */

static void
test_yaml_edit_every_allocation_failure_ends_cleanly(void **state)
{
    enum gw_code rc = GW_E_NOMEM;
    unsigned long n;

    (void)state;
    for (n = 1; n < 1000 && rc == GW_E_NOMEM; n++) {
        struct gw_buf out = {0};
        char why[128];

        gw_alloc_fail_at(n);
        rc = gw_yaml_set_model_spec(BLOCK_SPECS, strlen(BLOCK_SPECS), "a", "m9", &SET_BOTH, &out,
                                    why, sizeof(why));
        gw_alloc_fail_at(0);
        if (rc == GW_E_NOMEM)
            assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
    }
    assert_int_equal(rc, GW_OK);
}

/* ---- whole entries: gw_yaml_set_entry ---- */

#define SHA_A "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
#define SHA_A_PLAIN "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B_PLAIN "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define SHA_B "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\""

/* Comments, a flow item in a block list, a flow list, an indentless list. */
static const char MIXED[] =
    "# top comment\n"
    "server: {listen: [\"127.0.0.1:1\"]}\n"
    "providers:\n"
    "  # first provider\n"
    "  - name: pa   # trailing comment\n"
    "    dialect: openai\n"
    "    base_url: \"http://127.0.0.1:9\"\n"
    "    keys: [{value: sk-a}]\n"
    "    models: [\"*\"]   # all of them\n"
    "  - {name: pb, dialect: openai, base_url: \"http://127.0.0.1:9\", keys: [{value: sk-b}], "
    "models: [m1]}\n"
    "  # between\n"
    "  - name: pc\n"
    "    dialect: anthropic\n"
    "    base_url: \"http://127.0.0.1:9\"\n"
    "    keys:\n"
    "      - value: sk-c\n"
    "    models: [m2]\n"
    "\n"
    "# groups follow\n"
    "groups: [{name: g1, providers: [pa, pb]}, {name: g2, providers: [pc]}]  # flow\n"
    "clients:\n"
    "- name: alice\n"
    "  key_sha256: " SHA_A "\n"
    "  models: [g1]\n"
    "# end\n";

/* Runs gw_yaml_set_entry; asserts it succeeds and the text is a valid config. */
static const char *
set_ok(const char *yaml, const char *list, const char *name, const char *entry, bool *created)
{
    static struct gw_buf out;
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    char why[256];
    enum gw_code rc;

    gw_buf_fini(&out);
    rc = gw_yaml_set_entry(yaml, strlen(yaml), list, name, entry, entry ? strlen(entry) : 0, &out,
                           created, why, sizeof(why));
    if (rc != GW_OK)
        fail_msg("edit refused: %s (%s)", gw_code_str(rc), why);
    rc = gw_conf_parse(out.data, out.len, "/etc/gw", &env, &c, &p);
    if (rc != GW_OK) {
        char line[512] = "";

        if (p.n)
            gw_conf_problem_format(&p.v[0], line, sizeof(line));
        fail_msg("the edited config is refused: %s\n%s", line, out.data);
    }
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    return out.data;
}

/* <got> is <orig> with <old> (found once in it) replaced by <new>. */
static void
assert_replaced(const char *orig, const char *got, const char *old, const char *new_text)
{
    const char *at = strstr(orig, old);
    struct gw_buf want = {0};

    assert_non_null(at);
    assert_null(strstr(at + 1, old));
    assert_int_equal(gw_buf_append(&want, orig, (size_t)(at - orig)), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&want, new_text), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&want, at + strlen(old)), GW_OK);
    assert_string_equal(got, want.data);
    gw_buf_fini(&want);
}

static void
test_entry_replace_first_block_provider_keeps_every_other_byte(void **state)
{
    bool created = true;
    const char *got;

    (void)state;
    got =
        set_ok(MIXED, "providers", "pa",
               "{\"name\": \"pa\", \"dialect\": \"openai\", \"base_url\": \"http://127.0.0.1:7\", "
               "\"keys\": [{\"value\": \"sk-new\"}], \"models\": [\"gpt-4.1\", \"*\"], "
               "\"max_concurrent\": 4}",
               &created);
    assert_false(created);
    assert_replaced(MIXED, got,
                    "name: pa   # trailing comment\n"
                    "    dialect: openai\n"
                    "    base_url: \"http://127.0.0.1:9\"\n"
                    "    keys: [{value: sk-a}]\n"
                    "    models: [\"*\"]",
                    "name: pa\n"
                    "    dialect: openai\n"
                    "    base_url: \"http://127.0.0.1:7\"\n"
                    "    keys: [{value: sk-new}]\n"
                    "    models: [gpt-4.1, \"*\"]\n"
                    "    max_concurrent: 4");
}

static void
test_entry_replace_flow_item_of_block_list_stays_flow(void **state)
{
    const char *got;

    (void)state;
    got =
        set_ok(MIXED, "providers", "pb",
               "{\"name\": \"pb\", \"dialect\": \"responses\", \"base_url\": "
               "\"http://127.0.0.1:9\", \"keys\": [{\"value\": \"sk-b2\"}], \"models\": [\"m1\"]}",
               NULL);
    assert_replaced(MIXED, got,
                    "{name: pb, dialect: openai, base_url: \"http://127.0.0.1:9\", keys: [{value: "
                    "sk-b}], models: [m1]}",
                    "{name: pb, dialect: responses, base_url: \"http://127.0.0.1:9\", keys: "
                    "[{value: sk-b2}], models: [m1]}");
}

static void
test_entry_remove_last_block_provider_takes_its_lines_only(void **state)
{
    const char *got;

    (void)state;
    /* g2 names pc: drop g2 first so that the text stays a valid config */
    got = set_ok(MIXED, "groups", "g2", NULL, NULL);
    {
        static char after_g2[sizeof(MIXED)];

        snprintf(after_g2, sizeof(after_g2), "%s", got);
        got = set_ok(after_g2, "providers", "pc", NULL, NULL);
        assert_replaced(after_g2, got,
                        "  - name: pc\n"
                        "    dialect: anthropic\n"
                        "    base_url: \"http://127.0.0.1:9\"\n"
                        "    keys:\n"
                        "      - value: sk-c\n"
                        "    models: [m2]\n",
                        "");
    }
}

static void
test_entry_flow_list_remove_last_and_first_and_add(void **state)
{
    const char *got;

    (void)state;
    got = set_ok(MIXED, "groups", "g2", NULL, NULL);
    assert_replaced(MIXED, got, ", {name: g2, providers: [pc]}", "");
    got = set_ok(MIXED, "groups", "g3",
                 "{\"name\": \"g3\", \"type\": \"load-balance\", \"providers\": [{\"name\": "
                 "\"pa\", \"weight\": 3}, \"pb\"]}",
                 NULL);
    assert_replaced(MIXED, got, "{name: g2, providers: [pc]}]",
                    "{name: g2, providers: [pc]}, {name: g3, type: load-balance, providers: "
                    "[{name: pa, weight: 3}, pb]}]");
}

static void
test_entry_flow_list_remove_first_item(void **state)
{
    static const char y[] = "server: {listen: [\"127.0.0.1:1\"]}\n"
                            "providers: [{name: pa, dialect: openai, base_url: \"http://h\", "
                            "keys: [{value: k}], models: [\"*\"]}]\n"
                            "groups: [ {name: g1, providers: [pa]} , {name: g2, providers: "
                            "[pa]} ]\n";
    const char *got;

    (void)state;
    got = set_ok(y, "groups", "g1", NULL, NULL);
    assert_replaced(y, got, "{name: g1, providers: [pa]} , ", "");
}

static void
test_entry_add_to_indentless_block_list(void **state)
{
    bool created = false;
    const char *got;

    (void)state;
    got = set_ok(MIXED, "clients", "bob",
                 "{\"name\": \"bob\", \"key_sha256\": " SHA_B ", \"max_concurrent\": 2, "
                 "\"limits\": [{\"per\": \"day\", \"requests\": 100}]}",
                 &created);
    assert_true(created);
    assert_replaced(MIXED, got, "  models: [g1]\n",
                    "  models: [g1]\n"
                    "- name: bob\n"
                    "  key_sha256: " SHA_B_PLAIN "\n"
                    "  max_concurrent: 2\n"
                    "  limits: [{per: day, requests: 100}]\n");
}

static void
test_entry_add_after_block_list_with_flow_last_item_uses_flow(void **state)
{
    static const char y[] = "server: {listen: [\"127.0.0.1:1\"]}\n"
                            "providers:\n"
                            "    - {name: pa, dialect: openai, base_url: \"http://h\", keys: "
                            "[{value: k}], models: [\"*\"]}   # pa\n"
                            "# after\n";
    const char *got;

    (void)state;
    got =
        set_ok(y, "providers", "pz",
               "{\"name\": \"pz\", \"dialect\": \"gemini\", \"base_url\": \"http://h\", \"keys\": "
               "[{\"value\": \"k2\"}], \"models\": [\"m\"]}",
               NULL);
    assert_replaced(
        y, got, "   # pa\n",
        "   # pa\n"
        "    - {name: pz, dialect: gemini, base_url: \"http://h\", keys: [{value: k2}], "
        "models: [m]}\n");
}

static void
test_entry_rename_replaces_the_entry_in_place(void **state)
{
    const char *got;

    (void)state;
    got = set_ok(MIXED, "clients", "alice",
                 "{\"name\": \"alice2\", \"key_sha256\": " SHA_A ", \"models\": [\"g1\"]}", NULL);
    assert_replaced(MIXED, got, "name: alice\n  key_sha256: " SHA_A "\n",
                    "name: alice2\n  key_sha256: " SHA_A_PLAIN "\n");
}

static void
test_entry_remove_only_item_leaves_an_empty_list(void **state)
{
    const char *got;

    (void)state;
    got = set_ok(MIXED, "clients", "alice", NULL, NULL);
    assert_replaced(MIXED, got,
                    "clients:\n"
                    "- name: alice\n"
                    "  key_sha256: " SHA_A "\n"
                    "  models: [g1]\n",
                    "clients: []\n");
    /* and the empty list takes a new entry back */
    {
        static char empty[sizeof(MIXED)];

        snprintf(empty, sizeof(empty), "%s", got);
        got = set_ok(empty, "clients", "alice", "{\"name\": \"alice\", \"key_sha256\": " SHA_A "}",
                     NULL);
        assert_replaced(empty, got, "clients: []",
                        "clients: [{name: alice, key_sha256: " SHA_A_PLAIN "}]");
    }
}

static void
test_entry_missing_list_is_added_at_the_end(void **state)
{
    static const char y[] = "server: {listen: [\"127.0.0.1:1\"]}\r\n"
                            "providers: [{name: pa, dialect: openai, base_url: \"http://h\", "
                            "keys: [{value: k}], models: [\"*\"]}]  # one\r\n";
    bool created = false;
    const char *got;

    (void)state;
    got = set_ok(y, "groups", "g1", "{\"name\": \"g1\", \"providers\": [\"pa\"]}", &created);
    assert_true(created);
    assert_replaced(y, got, "# one\r\n",
                    "# one\r\ngroups:\r\n  - name: g1\r\n    providers: [pa]\r\n");
}

static void
test_entry_crlf_block_replace_keeps_crlf(void **state)
{
    static const char y[] = "server: {listen: [\"127.0.0.1:1\"]}\r\n"
                            "providers:\r\n"
                            "  - name: pa\r\n"
                            "    dialect: openai\r\n"
                            "    base_url: \"http://h\"\r\n"
                            "    keys: [{value: k}]\r\n"
                            "    models: [\"*\"]\r\n"
                            "# tail\r\n";
    const char *got;

    (void)state;
    got =
        set_ok(y, "providers", "pa",
               "{\"name\": \"pa\", \"dialect\": \"openai\", \"base_url\": \"http://h\", \"keys\": "
               "[{\"value\": \"k\"}], \"models\": [\"m\"]}",
               NULL);
    assert_replaced(y, got, "    models: [\"*\"]\r\n", "    models: [m]\r\n");
}

static void
test_entry_strings_that_would_read_back_otherwise_are_quoted(void **state)
{
    static const char e[] =
        "{\"name\": \"g9\", \"model\": \"yes\", \"x\": [\"8\", \"a b\", "
        "\"k: v\", \"#c\", \"\", \"on\", \"ok\", 7, true, null, \"*\", \"-x\"]}";
    struct gw_buf out = {0};
    char why[256];

    (void)state;
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "groups", "g9", e, strlen(e), &out,
                                       NULL, why, sizeof(why)),
                     GW_OK);
    assert_non_null(strstr(out.data, "{name: g9, model: \"yes\", x: [\"8\", \"a b\", \"k: v\", "
                                     "\"#c\", \"\", \"on\", ok, 7, true, null, \"*\", \"-x\"]}"));
    gw_buf_fini(&out);
}

static void
test_entry_refusals_with_their_codes(void **state)
{
    static const char twice[] = "providers:\n  - {name: pa}\n  - {name: pa}\n";
    static const char anchored[] = "providers:\n  - &p {name: pa}\n  - {name: pb}\n";
    struct gw_buf out = {0};
    char why[256];

    (void)state;
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "groups", "nope", NULL, 0, &out, NULL,
                                       why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_GROUP);
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "clients", "nope", NULL, 0, &out, NULL,
                                       why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_CLIENT);
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "providers", "nope", NULL, 0, &out,
                                       NULL, why, sizeof(why)),
                     GW_E_CONTROL_UNKNOWN_PROVIDER);
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "groups", "g1", "[1, 2]", 6, &out,
                                       NULL, why, sizeof(why)),
                     GW_E_BAD_REQUEST);
    assert_int_equal(gw_yaml_set_entry(MIXED, strlen(MIXED), "groups", "g1", "{\"a\": ", 6, &out,
                                       NULL, why, sizeof(why)),
                     GW_E_BAD_REQUEST);
    assert_int_equal(gw_yaml_set_entry(twice, strlen(twice), "providers", "pa", NULL, 0, &out, NULL,
                                       why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_int_equal(gw_yaml_set_entry(anchored, strlen(anchored), "providers", "pa", NULL, 0, &out,
                                       NULL, why, sizeof(why)),
                     GW_E_CONTROL_CONFIG_NOT_EDITABLE);
    assert_non_null(strstr(why, "anchor"));
    /* an anchor elsewhere does not stop an edit of another entry */
    assert_int_equal(gw_yaml_set_entry(anchored, strlen(anchored), "providers", "pb", NULL, 0, &out,
                                       NULL, why, sizeof(why)),
                     GW_OK);
    assert_string_equal(out.data, "providers:\n  - &p {name: pa}\n");
    gw_buf_fini(&out);
}

static void
test_entry_every_allocation_failure_ends_cleanly(void **state)
{
    static const char e[] = "{\"name\": \"bob\", \"key_sha256\": " SHA_B "}";
    enum gw_code rc = GW_E_NOMEM;
    unsigned long n;

    (void)state;
    for (n = 1; n < 2000 && rc == GW_E_NOMEM; n++) {
        struct gw_buf out = {0};
        char why[128];

        gw_alloc_fail_at(n);
        rc = gw_yaml_set_entry(MIXED, strlen(MIXED), "clients", "bob", e, strlen(e), &out, NULL,
                               why, sizeof(why));
        gw_alloc_fail_at(0);
        if (rc == GW_E_NOMEM)
            assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
    }
    assert_int_equal(rc, GW_OK);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_edit_block_provider_without_specs_gets_a_model_specs_line),
        cmocka_unit_test(test_yaml_edit_block_last_provider_nested_last_key),
        cmocka_unit_test(test_yaml_edit_insert_then_remove_gives_back_the_file),
        cmocka_unit_test(test_yaml_edit_block_entry_is_rewritten_keeping_its_prices),
        cmocka_unit_test(test_yaml_edit_keep_leaves_the_other_field),
        cmocka_unit_test(test_yaml_edit_block_new_model_goes_on_its_own_line),
        cmocka_unit_test(test_yaml_edit_block_remove_takes_the_entry_lines_only),
        cmocka_unit_test(test_yaml_edit_removing_the_last_entry_removes_model_specs),
        cmocka_unit_test(test_yaml_edit_removing_an_absent_entry_changes_nothing),
        cmocka_unit_test(test_yaml_edit_flow_provider_gets_model_specs_before_its_brace),
        cmocka_unit_test(test_yaml_edit_flow_specs_replace_add_and_remove),
        cmocka_unit_test(test_yaml_edit_flow_empty_specs_mapping_gets_the_entry),
        cmocka_unit_test(test_yaml_edit_crlf_file_gets_crlf_lines),
        cmocka_unit_test(test_yaml_edit_multibyte_characters_before_the_entry_keep_positions),
        cmocka_unit_test(test_yaml_edit_byte_order_mark_is_kept),
        cmocka_unit_test(test_yaml_edit_file_without_final_newline),
        cmocka_unit_test(test_yaml_edit_model_id_with_quotes_is_escaped),
        cmocka_unit_test(test_yaml_edit_block_scalar_last_value_keeps_its_trailing_lines),
        cmocka_unit_test(test_yaml_edit_refuses_to_remove_a_key_sharing_its_line),
        cmocka_unit_test(test_yaml_edit_refuses_bad_values_with_config_codes),
        cmocka_unit_test(test_yaml_edit_unknown_provider),
        cmocka_unit_test(test_yaml_edit_refuses_anchors_in_the_provider_but_not_elsewhere),
        cmocka_unit_test(test_yaml_edit_refuses_several_documents_and_syntax_errors),
        cmocka_unit_test(test_yaml_edit_every_allocation_failure_ends_cleanly),
        cmocka_unit_test(test_entry_replace_first_block_provider_keeps_every_other_byte),
        cmocka_unit_test(test_entry_replace_flow_item_of_block_list_stays_flow),
        cmocka_unit_test(test_entry_remove_last_block_provider_takes_its_lines_only),
        cmocka_unit_test(test_entry_flow_list_remove_last_and_first_and_add),
        cmocka_unit_test(test_entry_flow_list_remove_first_item),
        cmocka_unit_test(test_entry_add_to_indentless_block_list),
        cmocka_unit_test(test_entry_add_after_block_list_with_flow_last_item_uses_flow),
        cmocka_unit_test(test_entry_rename_replaces_the_entry_in_place),
        cmocka_unit_test(test_entry_remove_only_item_leaves_an_empty_list),
        cmocka_unit_test(test_entry_missing_list_is_added_at_the_end),
        cmocka_unit_test(test_entry_crlf_block_replace_keeps_crlf),
        cmocka_unit_test(test_entry_strings_that_would_read_back_otherwise_are_quoted),
        cmocka_unit_test(test_entry_refusals_with_their_codes),
        cmocka_unit_test(test_entry_every_allocation_failure_ends_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
