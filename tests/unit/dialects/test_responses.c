/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_responses.c - the OpenAI Responses shape's file
 * (dialects/responses.c): the row in the hub's table, gateway refusals in the shape
 * (types and the codes SDKs act on), the frame that ends a broken stream (read back by
 * the shape's own parser), a recorded upstream error read and rendered, the response id,
 * and the conversation store's helpers (expansion of previous_response_id with every
 * other byte kept, the input as items, refusals, out of memory).
 * See: dialects/responses.c, tests/fixtures/responses/
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/alloc.h"
#include "dialects/canon.h"
#include "dialects/responses-priv.h"
#include "dialects/responses.h"

#define T_FIXTURES "tests/fixtures/responses/"
#include "t_messages.h"

/* ---- the table ---- */

static void
test_responses_row_in_the_table(void **state)
{
    const struct dl_shape_ops *o = dl_shape_ops(DL_SHAPE_RESPONSES);

    (void)state;
    assert_ptr_equal(o, &dl_responses_shape);
    assert_int_equal(o->shape, DL_SHAPE_RESPONSES);
    assert_string_equal(o->name, "responses");
    assert_string_equal(dl_shape_name(DL_SHAPE_RESPONSES), "responses");
    assert_non_null(o->request_parse);
    assert_non_null(o->request_render);
    assert_non_null(o->parse_init);
    assert_non_null(o->event_parse);
    assert_non_null(o->answer_parse);
    assert_non_null(o->render_init);
    assert_non_null(o->event_render);
    assert_non_null(o->render_end);
    assert_non_null(o->answer_render);
    assert_non_null(o->error_render);
    assert_non_null(o->error_frame);
    assert_non_null(o->upstream_error_render);
    assert_non_null(o->upstream_error_read);
    assert_non_null(o->answer_usage);
}

/* ---- errors ---- */

static void
t_error_is(enum gw_code code, const char *message, const char *want)
{
    struct gw_buf out = {0};

    assert_int_equal(dl_responses_shape.error_render(code, gw_str_c(message), &out), GW_OK);
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
}

static void
test_responses_error_render_types_and_codes(void **state)
{
    (void)state;
    t_error_is(GW_E_BAD_REQUEST, "input[0].role: bad",
               "{\"error\":{\"message\":\"input[0].role: bad\",\"type\":\"invalid_request_error\","
               "\"param\":null,\"code\":\"gw.bad_request\"}}");
    t_error_is(GW_E_UNCONVERTIBLE, "n: no",
               "{\"error\":{\"message\":\"n: no\",\"type\":\"invalid_request_error\",\"param\":"
               "null,\"code\":\"gw.unconvertible\"}}");
    t_error_is(GW_E_AUTH_INVALID_KEY, "",
               "{\"error\":{\"message\":\"gw.auth.invalid_key\",\"type\":"
               "\"authentication_error\",\"param\":null,\"code\":\"gw.auth.invalid_key\"}}");
    t_error_is(GW_E_MODEL_NOT_ALLOWED, "no",
               "{\"error\":{\"message\":\"no\",\"type\":\"permission_error\",\"param\":null,"
               "\"code\":\"gw.model_not_allowed\"}}");
    t_error_is(GW_E_MODEL_NOT_FOUND, "no",
               "{\"error\":{\"message\":\"no\",\"type\":\"not_found_error\",\"param\":null,"
               "\"code\":\"gw.model_not_found\"}}");
    t_error_is(GW_E_BUSY_ALL, "busy",
               "{\"error\":{\"message\":\"busy\",\"type\":\"rate_limit_error\",\"param\":null,"
               "\"code\":\"gw.busy_all\"}}");
    t_error_is(GW_E_UPSTREAM_TIMEOUT, "slow",
               "{\"error\":{\"message\":\"slow\",\"type\":\"timeout_error\",\"param\":null,"
               "\"code\":\"gw.upstream.timeout\"}}");
    t_error_is(GW_E_UPSTREAM_FAILED, "down",
               "{\"error\":{\"message\":\"down\",\"type\":\"server_error\",\"param\":null,"
               "\"code\":\"gw.upstream.failed\"}}");
    /* the codes SDKs act on: OpenAI's in "code", gw's beside it */
    t_error_is(GW_E_KEY_LIMIT_COST_PER_PERIOD, "spent",
               "{\"error\":{\"message\":\"spent\",\"type\":\"insufficient_quota\",\"param\":null,"
               "\"code\":\"insufficient_quota\",\"gw_code\":\"gw.key_limit.cost_per_period\"}}");
    t_error_is(GW_E_CONTEXT_LENGTH, "too long",
               "{\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\",\"param\":"
               "null,\"code\":\"context_length_exceeded\",\"gw_code\":"
               "\"gw.context_length_exceeded\"}}");
    /* a config code is a caller bug: a server error */
    t_error_is(GW_E_CFG_SYNTAX, "x",
               "{\"error\":{\"message\":\"x\",\"type\":\"server_error\",\"param\":null,\"code\":"
               "\"config.syntax\"}}");
}

static int
t_keep_error(void *arg, const struct dl_event *ev)
{
    struct gw_buf *b = arg;

    return t_record(b, ev);
}

static void
test_responses_error_frame_ends_a_broken_stream(void **state)
{
    struct gw_buf out = {0}, got = {0};
    struct t_sse ev[2];
    struct dl_parse_state st;

    (void)state;
    assert_int_equal(dl_responses_shape.error_frame(GW_E_UPSTREAM_TOO_SLOW,
                                                    GW_STR_LIT("the upstream is too slow"), &out),
                     GW_OK);
    assert_string_equal(
        out.data,
        "event: error\ndata: {\"type\":\"error\",\"sequence_number\":1000000000,\"code\":"
        "\"server_error\",\"message\":\"the upstream is too slow\",\"param\":null,\"error\":"
        "{\"type\":\"server_error\",\"code\":\"server_error\",\"message\":\"the upstream is too "
        "slow\",\"param\":null,\"gw_code\":\"gw.upstream.too_slow\"}}\n\n"
        "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":"
        "1000000001,\"response\":{\"id\":\"resp_gw\",\"object\":\"response\",\"created_at\":0,"
        "\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"the upstream "
        "is too slow\",\"gw_code\":\"gw.upstream.too_slow\"},\"incomplete_details\":null,"
        "\"usage\":null}}\n\n");
    /* the shape's own parser reads it as the failure it is (the first event ends it) */
    assert_int_equal(t_sse_split(out.data, out.len, ev, 2), 2);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(
        dl_responses_shape.event_parse(&st, ev[0].event, ev[0].data, t_keep_error, &got), GW_OK);
    assert_int_equal(
        dl_responses_shape.event_parse(&st, ev[1].event, ev[1].data, t_keep_error, &got), GW_OK);
    t_lines_eq(&got, "ERROR type=server_error status=500 message=\"the upstream is too slow\"\n");
    /* and so does the next reader, the response alone */
    gw_buf_reset(&got);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(
        dl_responses_shape.event_parse(&st, ev[1].event, ev[1].data, t_keep_error, &got), GW_OK);
    t_lines_eq(&got, "START id=resp_gw model=\n"
                     "ERROR type=server_error status=500 message=\"the upstream is too slow\"\n");
    /* appended, and with the code's name when no message is given */
    gw_buf_reset(&out);
    assert_int_equal(gw_buf_append_cstr(&out, "x"), GW_OK);
    assert_int_equal(
        dl_responses_shape.error_frame(GW_E_UPSTREAM_DROPPED, (struct gw_str){"", 0}, &out), GW_OK);
    assert_int_equal(out.data[0], 'x');
    assert_non_null(strstr(out.data, "\"message\":\"gw.upstream.dropped\""));
    gw_buf_fini(&out);
    gw_buf_fini(&got);
}

static void
test_responses_upstream_error_read_and_rendered(void **state)
{
    struct gw_str type, message;
    struct gw_buf out = {0};
    size_t len;
    char *body = t_fixture("error_rate_limit.json", &len);

    (void)state;
    dl_responses_shape.upstream_error_read(body, len, 429, &type, &message);
    assert_true(gw_str_eq(type, GW_STR_LIT("tokens")));
    assert_int_equal(strncmp(message.ptr, "Rate limit reached for gpt-4.1", 30), 0);
    assert_int_equal(dl_responses_shape.upstream_error_render(429, type, message, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"message\":\"Rate limit reached for gpt-4.1 in organization org-x on "
              "tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in "
              "2s.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}");
    /* a body of another shape: mapped by its type */
    gw_buf_reset(&out);
    assert_int_equal(dl_responses_shape.upstream_error_render(529, GW_STR_LIT("overloaded_error"),
                                                              GW_STR_LIT("Overloaded"), &out),
                     GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"param\":null,"
              "\"code\":null}}");
    gw_buf_fini(&out);
    free(body);
}

static void
test_responses_error_out_of_memory_leaves_out_as_it_was(void **state)
{
    unsigned long k;

    (void)state;
    for (k = 1; k < 12; k++) {
        struct gw_buf out = {0};
        enum gw_code rc;

        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        gw_alloc_fail_at(k);
        rc = dl_responses_shape.error_render(GW_E_CONTEXT_LENGTH, GW_STR_LIT("long message here"),
                                             &out);
        if (rc == GW_OK)
            rc = dl_responses_shape.error_frame(GW_E_UPSTREAM_FAILED, GW_STR_LIT("x"), &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc != GW_OK)
            assert_true(strcmp(out.data, "keep") == 0 || strstr(out.data, "}}") != NULL);
        gw_buf_fini(&out);
    }
}

/* ---- the response id ---- */

static void
test_responses_id_of_the_request_id(void **state)
{
    static const char *const cases[][2] = {
        {"0123abcd", "\"resp_0123abcd\""},
        {"resp_given", "\"resp_given\""},
        {"", "\"resp_gw\""},
        {"re\"q", "\"resp_re\\\"q\""},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dl_render_ctx ctx = {.id = gw_str_c(cases[i][0])};
        struct gw_buf out = {0};

        assert_int_equal(dl_responses_id_json(&out, &ctx), GW_OK);
        assert_string_equal(out.data, cases[i][1]);
        gw_buf_fini(&out);
    }
}

/* ---- the conversation store's helpers ---- */

#define T_ITEMS                                                                                    \
    "[{\"role\":\"user\",\"content\":\"one\"}, {\"type\":\"message\",\"role\":\"assistant\","      \
    "\"content\":[{\"type\":\"output_text\",\"text\":\"two\"}]}]"
#define T_ITEMS_IN                                                                                 \
    "{\"role\":\"user\",\"content\":\"one\"}, {\"type\":\"message\",\"role\":\"assistant\","       \
    "\"content\":[{\"type\":\"output_text\",\"text\":\"two\"}]}"

static void
t_expand_is(const char *body, const char *items, const char *want)
{
    struct gw_buf out = {0};
    json_t *j;

    assert_int_equal(dl_responses_expand(body, strlen(body), gw_str_c(items), &out), GW_OK);
    if (strcmp(out.data, want) != 0) {
        print_error("got:  %s\nwant: %s\n", out.data, want);
        fail();
    }
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_non_null(j); /* still one JSON object */
    assert_null(json_object_get(j, "previous_response_id"));
    assert_true(json_is_array(json_object_get(j, "input")));
    json_decref(j);
    gw_buf_fini(&out);
}

static void
test_responses_expand_previous_response_id(void **state)
{
    (void)state;
    /* the id before the input, with the client's spacing and numbers kept byte for byte */
    t_expand_is("{\"model\": \"m\", \"previous_response_id\": \"resp_1\", \"input\": [{\"role\":"
                "\"user\",\"content\":\"three\"}], \"temperature\": 0.70}",
                T_ITEMS,
                "{\"model\": \"m\", \"input\": [" T_ITEMS_IN ",{\"role\":\"user\",\"content\":"
                "\"three\"}], \"temperature\": 0.70}");
    /* after it, first, last */
    t_expand_is("{\"input\":\"three\",\"previous_response_id\":\"r\",\"model\":\"m\"}", T_ITEMS,
                "{\"input\":[" T_ITEMS_IN ",{\"type\":\"message\",\"role\":\"user\",\"content\":"
                "[{\"type\":\"input_text\",\"text\":\"three\"}]}],\"model\":\"m\"}");
    t_expand_is("{ \"previous_response_id\" : \"r\" ,\n \"input\":[],\"model\":\"m\"}", "[]",
                "{ \"input\":[],\"model\":\"m\"}");
    t_expand_is("{\"model\":\"m\",\"input\":[ ],\"previous_response_id\":\"r\"}", T_ITEMS,
                "{\"model\":\"m\",\"input\":[" T_ITEMS_IN "]}");
    /* a string input keeps its own bytes, escapes included */
    t_expand_is("{\"model\":\"m\",\"input\":\"say \\\"hi\\\"\\n\",\"previous_response_id\":\"r\"}",
                " [ ] ",
                "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":"
                "[{\"type\":\"input_text\",\"text\":\"say \\\"hi\\\"\\n\"}]}]}");
    /* no input: the id's member becomes it; neither: one is added */
    t_expand_is("{\"model\":\"m\",\"previous_response_id\":\"r\",\"store\":true}", T_ITEMS,
                "{\"model\":\"m\",\"input\":[" T_ITEMS_IN "],\"store\":true}");
    t_expand_is("{\"model\":\"m\"}", T_ITEMS, "{\"input\":[" T_ITEMS_IN "],\"model\":\"m\"}");
    t_expand_is("{}", "[1]", "{\"input\":[1]}");
    t_expand_is("{\"input\":null,\"previous_response_id\":\"r\"}", T_ITEMS,
                "{\"input\":[" T_ITEMS_IN "]}");
    /* a key written with an escape is the key */
    t_expand_is("{\"previous_response_\\u0069d\":\"r\",\"inp\\u0075t\":\"x\"}", "[]",
                "{\"inp\\u0075t\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
                "\"input_text\",\"text\":\"x\"}]}]}");
}

static void
test_responses_expand_refusals_leave_out_as_it_was(void **state)
{
    static const char *const bad[][2] = {
        {"[]", "[]"},
        {"{\"input\":\"a\",\"input\":\"b\"}", "[]"},
        {"{\"previous_response_id\":\"a\",\"previous_response_id\":\"b\"}", "[]"},
        {"{\"input\":7}", "[]"},
        {"{\"input\":{}}", "[]"},
        {"{\"model\":\"m\"", "[]"},
        {"{\"model\":\"m\"} x", "[]"},
        {"{\"model\":\"m\"}", "{}"},
        {"{\"model\":\"m\"}", "[1"},
        {"{\"model\":\"m\"}", "[] []"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_buf out = {0};

        assert_int_equal(gw_buf_append_cstr(&out, "kept"), GW_OK);
        assert_int_equal(
            dl_responses_expand(bad[i][0], strlen(bad[i][0]), gw_str_c(bad[i][1]), &out),
            GW_E_BAD_REQUEST);
        assert_string_equal(out.data, "kept");
        gw_buf_fini(&out);
    }
}

static void
test_responses_input_items_of_a_request(void **state)
{
    static const char *const cases[][2] = {
        {"{\"model\":\"m\",\"input\": [ {\"role\":\"user\",\"content\":\"a\"} ] }",
         "[{\"role\":\"user\",\"content\":\"a\"}]"},
        {"{\"input\":\"a\\u00e9\"}", "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{"
                                     "\"type\":\"input_text\",\"text\":\"a\\u00e9\"}]}]"},
        {"{\"model\":\"m\"}", "[]"},
        {"{\"input\":null}", "[]"},
    };
    struct gw_buf out = {0};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_buf_reset(&out);
        assert_int_equal(dl_responses_input_items(cases[i][0], strlen(cases[i][0]), &out), GW_OK);
        assert_string_equal(out.data, cases[i][1]);
    }
    gw_buf_reset(&out);
    assert_int_equal(gw_buf_append_cstr(&out, "kept"), GW_OK);
    assert_int_equal(dl_responses_input_items("{\"input\":1}", 11, &out), GW_E_BAD_REQUEST);
    assert_int_equal(dl_responses_input_items("{\"input\":[],\"input\":[]}", 23, &out),
                     GW_E_BAD_REQUEST);
    assert_int_equal(dl_responses_input_items("nope", 4, &out), GW_E_BAD_REQUEST);
    assert_string_equal(out.data, "kept");
    gw_buf_fini(&out);
}

static void
test_responses_helpers_out_of_memory_leave_out_as_it_was(void **state)
{
    static const char body[] =
        "{\"model\":\"m\",\"previous_response_id\":\"r\",\"input\":\"three\",\"x\":1}";
    unsigned long k;
    bool ok_seen = false;

    (void)state;
    for (k = 1; k < 40 && !ok_seen; k++) {
        struct gw_buf out = {0};
        enum gw_code rc;

        assert_int_equal(gw_buf_append_cstr(&out, "kept"), GW_OK);
        gw_alloc_fail_at(k);
        rc = dl_responses_expand(body, strlen(body), GW_STR_LIT(T_ITEMS), &out);
        if (rc == GW_OK)
            rc = dl_responses_input_items(body, strlen(body), &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc == GW_OK)
            ok_seen = true;
        else
            assert_true(strcmp(out.data, "kept") == 0 || strstr(out.data, "\"x\":1}") != NULL);
        gw_buf_fini(&out);
    }
    assert_true(ok_seen);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_responses_row_in_the_table),
        cmocka_unit_test(test_responses_error_render_types_and_codes),
        cmocka_unit_test(test_responses_error_frame_ends_a_broken_stream),
        cmocka_unit_test(test_responses_upstream_error_read_and_rendered),
        cmocka_unit_test(test_responses_error_out_of_memory_leaves_out_as_it_was),
        cmocka_unit_test(test_responses_id_of_the_request_id),
        cmocka_unit_test(test_responses_expand_previous_response_id),
        cmocka_unit_test(test_responses_expand_refusals_leave_out_as_it_was),
        cmocka_unit_test(test_responses_input_items_of_a_request),
        cmocka_unit_test(test_responses_helpers_out_of_memory_leave_out_as_it_was),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
