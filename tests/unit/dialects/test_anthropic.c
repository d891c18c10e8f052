/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_anthropic.c - the Messages shape's errors and table
 * (dialects/anthropic.c): gateway refusals in the Messages error shape with our code,
 * the stream's unavailable frame, upstream error bodies read and rendered through the
 * one status table, every operation present in dl_anthropic_shape. The request and the
 * answers have their own tests (test_anthropic_request.c, test_anthropic_answer.c).
 * See: dialects/anthropic.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/alloc.h"
#include "dialects/anthropic-priv.h"
#include "dialects/anthropic.h"
#include "dialects/canon.h"

/* Asserts that <got> (JSON text) equals the JSON <want>, printing both when not. */
static void
t_json_eq(const char *got, size_t len, const char *want)
{
    json_t *g = json_loadb(got, len, 0, NULL);
    json_t *w = json_loads(want, 0, NULL);

    assert_non_null(w);
    if (!g || !json_equal(g, w)) {
        print_error("got:  %.*s\nwant: %s\n", (int)len, got, want);
        fail();
    }
    json_decref(g);
    json_decref(w);
}

/* ==== the Messages shape: errors and the table ==== */

static void
t_shape_error(enum gw_code code, const char *message, const char *want)
{
    struct gw_buf out = {0};

    assert_int_equal(dl_anthropic_shape.error_render(code, gw_str_c(message), &out), GW_OK);
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
}

static void
test_messages_error_render_types_by_status_with_our_code(void **state)
{
    static const struct {
        enum gw_code code;
        const char *type;
    } cases[] = {
        {GW_E_BAD_REQUEST, "invalid_request_error"},
        {GW_E_UNCONVERTIBLE, "invalid_request_error"},
        {GW_E_AUTH_MISSING_KEY, "authentication_error"},
        {GW_E_AUTH_INVALID_KEY, "authentication_error"},
        {GW_E_MODEL_NOT_ALLOWED, "permission_error"},
        {GW_E_MODEL_NOT_FOUND, "not_found_error"},
        {GW_E_BODY_TOO_LARGE, "request_too_large"},
        {GW_E_BUSY_ALL, "rate_limit_error"},
        {GW_E_KEY_LIMIT_TOKENS_PER_PERIOD, "rate_limit_error"},
        {GW_E_INTERNAL, "api_error"},
        {GW_E_UPSTREAM_FAILED, "api_error"},
        {GW_E_UPSTREAM_TOO_SLOW, "overloaded_error"},
        {GW_E_UPSTREAM_TIMEOUT, "timeout_error"},
        {GW_E_CLIENT_TIMEOUT, "timeout_error"},
        {GW_E_METHOD_NOT_ALLOWED, "invalid_request_error"},
        {GW_OK, "api_error"}, /* not an error: a caller's bug, said as 500 */
    };
    char want[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(want, sizeof(want),
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"why \\\"x\\\"\","
                 "\"gw_code\":\"%s\"}}",
                 cases[i].type, gw_code_str(cases[i].code));
        t_shape_error(cases[i].code, "why \"x\"", want);
    }
    /* no message: the code says it */
    t_shape_error(GW_E_BAD_REQUEST, "",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"gw.bad_request\",\"gw_code\":\"gw.bad_request\"}}");
}

static void
test_messages_error_context_length_says_prompt_is_too_long(void **state)
{
    (void)state;
    /* the words Claude Code compacts the conversation on */
    t_shape_error(GW_E_CONTEXT_LENGTH, "210000 tokens > 200000 maximum",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"prompt is too long: 210000 tokens > 200000 maximum\",\"gw_code\":"
                  "\"gw.context_length_exceeded\"}}");
    t_shape_error(GW_E_CONTEXT_LENGTH, "prompt is too long: 9 > 8",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"prompt is too long: 9 > 8\",\"gw_code\":\"gw.context_length_exceeded\"}}");
}

static void
test_messages_error_frame_is_overloaded_whatever_broke(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&out, "P"), GW_OK);
    assert_int_equal(
        dl_anthropic_shape.error_frame(GW_E_UPSTREAM_TOO_SLOW, GW_STR_LIT("too slow"), &out),
        GW_OK);
    assert_string_equal(out.data, "Pevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                                  "\"overloaded_error\",\"message\":\"too slow\",\"gw_code\":"
                                  "\"gw.upstream.too_slow\"}}\n\n");
    gw_buf_reset(&out);
    assert_int_equal(dl_anthropic_shape.error_frame(GW_E_BAD_REQUEST, GW_STR_LIT("x"), &out),
                     GW_OK);
    assert_non_null(strstr(out.data, "\"type\":\"overloaded_error\""));
    gw_buf_fini(&out);
}

static void
test_messages_upstream_error_read(void **state)
{
    static const struct {
        const char *body;
        int status;
        const char *type, *message;
    } cases[] = {
        {"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},"
         "\"request_id\":\"req_1\"}",
         529, "overloaded_error", "Overloaded"},
        /* an OpenAI error body reads the same way */
        {"{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":"
         "\"rate_limit_exceeded\"}}",
         429, "requests", "Rate limit reached"},
        /* escapes are left in the slice */
        {"{\"error\":{\"type\":\"invalid_request_error\",\"message\":\"role \\\"x\\\"\"}}", 400,
         "invalid_request_error", "role \\\"x\\\""},
        /* not an error body: the status decides */
        {"<html>bad gateway</html>", 502, "api_error", "the upstream failed"},
        {"", 429, "rate_limit_error", "the upstream is rate limiting requests"},
        {"{\"error\":{\"type\":5}}", 404, "not_found_error",
         "the upstream does not know this model or path"},
        {"{\"error\":\"x\"}", 503, "overloaded_error", "the upstream is overloaded"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_str type, message;

        dl_anthropic_shape.upstream_error_read(cases[i].body, strlen(cases[i].body),
                                               cases[i].status, &type, &message);
        if (!gw_str_eq(type, gw_str_c(cases[i].type)) ||
            !gw_str_eq(message, gw_str_c(cases[i].message))) {
            print_error("case %zu: %.*s / %.*s\n", i, (int)type.len, type.ptr, (int)message.len,
                        message.ptr);
            fail();
        }
    }
}

static void
test_messages_upstream_error_render_maps_foreign_types_by_status(void **state)
{
    static const struct {
        int status;
        const char *type, *message, *want_type, *want_message;
    } cases[] = {
        {529, "overloaded_error", "Overloaded", "overloaded_error", "Overloaded"},
        {400, "invalid_request_error", "bad", "invalid_request_error", "bad"},
        {402, "billing_error", "pay", "billing_error", "pay"},
        {500, "server_error", "oops", "api_error", "oops"},
        {429, "rate_limit_exceeded", "slow down", "rate_limit_error", "slow down"},
        {429, "requests", "slow down", "rate_limit_error", "slow down"},
        {401, "invalid_request_error", "bad key", "authentication_error", "bad key"},
        {404, "invalid_request_error", "no model", "not_found_error", "no model"},
        {422, "", "", "invalid_request_error", "the upstream refused the request"},
        {503, "x", "", "overloaded_error", "the upstream is overloaded"},
        {418, "not_found_error", "teapot", "invalid_request_error", "teapot"},
    };
    char want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_buf out = {0};

        assert_int_equal(dl_anthropic_shape.upstream_error_render(cases[i].status,
                                                                  gw_str_c(cases[i].type),
                                                                  gw_str_c(cases[i].message), &out),
                         GW_OK);
        snprintf(want, sizeof(want),
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}",
                 cases[i].want_type, cases[i].want_message);
        t_json_eq(out.data, out.len, want);
        gw_buf_fini(&out);
    }
}

static void
test_messages_shape_table_has_every_operation(void **state)
{
    const struct dl_shape_ops *ops = &dl_anthropic_shape;

    (void)state;
    assert_int_equal(ops->shape, DL_SHAPE_MESSAGES);
    assert_string_equal(ops->name, "messages");
    assert_non_null(ops->request_parse);
    assert_non_null(ops->request_render);
    assert_non_null(ops->parse_init);
    assert_non_null(ops->event_parse);
    assert_non_null(ops->answer_parse);
    assert_non_null(ops->render_init);
    assert_non_null(ops->event_render);
    assert_non_null(ops->render_end);
    assert_non_null(ops->answer_render);
    assert_non_null(ops->error_render);
    assert_non_null(ops->error_frame);
    assert_non_null(ops->upstream_error_render);
    assert_non_null(ops->upstream_error_read);
    assert_non_null(ops->answer_usage);
}

static void
test_messages_error_out_of_memory_leaves_out_as_it_was(void **state)
{
    unsigned long k;

    (void)state;
    for (k = 1; k < 12; k++) {
        struct gw_buf out = {0};
        enum gw_code rc;

        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        gw_alloc_fail_at(k);
        rc = dl_anthropic_shape.error_render(GW_E_CONTEXT_LENGTH, GW_STR_LIT("a long message"),
                                             &out);
        if (rc == GW_OK)
            rc = dl_anthropic_shape.error_frame(GW_E_UPSTREAM_FAILED, GW_STR_LIT("m"), &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc != GW_OK)
            assert_true(strncmp(out.data, "keep", 4) == 0 &&
                        (out.len == 4 || out.data[out.len - 1] == '}'));
        gw_buf_fini(&out);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_error_render_types_by_status_with_our_code),
        cmocka_unit_test(test_messages_error_context_length_says_prompt_is_too_long),
        cmocka_unit_test(test_messages_error_frame_is_overloaded_whatever_broke),
        cmocka_unit_test(test_messages_upstream_error_read),
        cmocka_unit_test(test_messages_upstream_error_render_maps_foreign_types_by_status),
        cmocka_unit_test(test_messages_shape_table_has_every_operation),
        cmocka_unit_test(test_messages_error_out_of_memory_leaves_out_as_it_was),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
