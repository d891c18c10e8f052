/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_gemini.c - the Gemini shape's file (dialects/gemini.c) and
 * listing (dialects/gemini_models.c): its row in the hub's table; the error body of every
 * kind of gateway refusal (the status table), the stream's error frame; upstream error
 * bodies read (an object, the JSON-array stream's, a foreign or broken one) and rendered;
 * both spellings of field names; generated call ids; the model listing.
 * See: dialects/gemini.c, dialects/gemini_models.c, tests/fixtures/gemini/
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/arena.h"
#include "dialects/canon.h"
#include "dialects/gemini.h"
#include "dialects/openai.h"
#include "t_gemini.h"

static void
t_str_is(struct gw_str s, const char *want)
{
    if (!gw_str_eq(s, gw_str_c(want))) {
        print_error("got \"%.*s\", want \"%s\"\n", (int)s.len, s.ptr ? s.ptr : "", want);
        fail();
    }
}

static void
test_gemini_row_in_the_table(void **state)
{
    const struct dl_shape_ops *o = dl_shape_ops(DL_SHAPE_GEMINI);

    (void)state;
    assert_ptr_equal(o, &dl_gemini_shape);
    assert_int_equal(o->shape, DL_SHAPE_GEMINI);
    assert_string_equal(o->name, "gemini");
    assert_non_null(o->request_parse);
    assert_non_null(o->request_render);
    assert_non_null(o->event_parse);
    assert_non_null(o->answer_parse);
    assert_non_null(o->render_end);
    assert_non_null(o->answer_usage);
}

static void
test_gemini_error_bodies_by_status(void **state)
{
    static const struct {
        enum gw_code code;
        int status;
        const char *name;
    } cases[] = {
        {GW_E_BAD_REQUEST, 400, "INVALID_ARGUMENT"},
        {GW_E_UNCONVERTIBLE, 400, "INVALID_ARGUMENT"},
        {GW_E_AUTH_MISSING_KEY, 401, "UNAUTHENTICATED"},
        {GW_E_MODEL_NOT_ALLOWED, 403, "PERMISSION_DENIED"},
        {GW_E_MODEL_NOT_FOUND, 404, "NOT_FOUND"},
        {GW_E_CLIENT_TIMEOUT, 408, "DEADLINE_EXCEEDED"},
        {GW_E_BODY_TOO_LARGE, 413, "INVALID_ARGUMENT"},
        {GW_E_BUSY_ALL, 429, "RESOURCE_EXHAUSTED"},
        {GW_E_KEY_LIMIT_COST_PER_PERIOD, 429, "RESOURCE_EXHAUSTED"},
        {GW_E_CLIENT_CANCELLED, 499, "CANCELLED"},
        {GW_E_INTERNAL, 500, "INTERNAL"},
        {GW_E_UPSTREAM_FAILED, 502, "UNAVAILABLE"},
        {GW_E_SHUTTING_DOWN, 503, "UNAVAILABLE"},
        {GW_E_UPSTREAM_TIMEOUT, 504, "DEADLINE_EXCEEDED"},
        {GW_E_CFG_SYNTAX, 500, "INTERNAL"}, /* not a run-time code: a caller bug, said as 500 */
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct gw_buf out = {0};
        char want[512];

        assert_int_equal(
            dl_gemini_shape.error_render(cases[k].code, GW_STR_LIT("why \"so\""), &out), GW_OK);
        snprintf(want, sizeof(want),
                 "{\"error\":{\"code\":%d,\"message\":\"why \\\"so\\\"\",\"status\":\"%s\","
                 "\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\","
                 "\"reason\":\"%s\",\"domain\":\"gw\"}]}}",
                 cases[k].status, cases[k].name, gw_code_str(cases[k].code));
        t_json_eq(out.data, out.len, want);
        gw_buf_fini(&out);
    }
}

static void
test_gemini_error_frame_and_empty_message(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
    assert_int_equal(dl_gemini_shape.error_render(GW_E_AUTH_INVALID_KEY, GW_STR_LIT(""), &out),
                     GW_OK);
    t_json_eq(out.data + 4, out.len - 4,
              "{\"error\":{\"code\":401,\"message\":\"gw.auth.invalid_key\",\"status\":"
              "\"UNAUTHENTICATED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc."
              "ErrorInfo\",\"reason\":\"gw.auth.invalid_key\",\"domain\":\"gw\"}]}}");
    gw_buf_reset(&out);
    /* whatever broke, the stream ends unavailable */
    assert_int_equal(dl_gemini_shape.error_frame(GW_E_UPSTREAM_TOO_SLOW, GW_STR_LIT("slow"), &out),
                     GW_OK);
    assert_memory_equal(out.data, "data: {", 7);
    assert_memory_equal(out.data + out.len - 4, "\r\n\r\n", 4);
    t_json_eq(out.data + 6, out.len - 10,
              "{\"error\":{\"code\":503,\"message\":\"slow\",\"status\":\"UNAVAILABLE\","
              "\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":"
              "\"gw.upstream.too_slow\",\"domain\":\"gw\"}]}}");
    gw_buf_fini(&out);
}

static void
test_gemini_upstream_errors_read_and_rendered(void **state)
{
    size_t len;
    char *body = t_fixture("error_invalid.json", &len);
    struct gw_str type, msg;
    struct gw_buf out = {0};

    (void)state;
    dl_gemini_shape.upstream_error_read(body, len, 400, &type, &msg);
    t_str_is(type, "INVALID_ARGUMENT");
    /* a slice of the body, escapes left in */
    t_str_is(msg, "* GenerateContentRequest.contents: contents is not specified\\n");
    free(body);
    body = t_fixture("error_array.json", &len);
    dl_gemini_shape.upstream_error_read(body, len, 429, &type, &msg);
    t_str_is(type, "RESOURCE_EXHAUSTED");
    t_str_is(msg, "Resource has been exhausted (e.g. check quota).");
    free(body);
    /* a foreign body: no status member; the status decides */
    body = strdup("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
                  "\"Overloaded\"}}");
    dl_gemini_shape.upstream_error_read(body, strlen(body), 529, &type, &msg);
    t_str_is(type, "UNAVAILABLE");
    t_str_is(msg, "Overloaded");
    assert_int_equal(
        dl_gemini_shape.upstream_error_render(529, GW_STR_LIT("overloaded_error"), msg, &out),
        GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"code\":529,\"message\":\"Overloaded\",\"status\":\"UNAVAILABLE\"}}");
    free(body);
    /* not JSON: the status' name and generic words */
    dl_gemini_shape.upstream_error_read("<html>", 6, 503, &type, &msg);
    t_str_is(type, "UNAVAILABLE");
    t_str_is(msg, "the upstream is unavailable");
    /* Google's own name is kept when it stands for that status */
    gw_buf_reset(&out);
    assert_int_equal(dl_gemini_shape.upstream_error_render(400, GW_STR_LIT("FAILED_PRECONDITION"),
                                                           GW_STR_LIT("m"), &out),
                     GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"code\":400,\"message\":\"m\",\"status\":\"FAILED_PRECONDITION\"}}");
    gw_buf_reset(&out);
    assert_int_equal(
        dl_gemini_shape.upstream_error_render(429, GW_STR_LIT("NOT_FOUND"), GW_STR_LIT(""), &out),
        GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"code\":429,\"message\":\"the upstream is rate limiting requests\","
              "\"status\":\"RESOURCE_EXHAUSTED\"}}");
    gw_buf_fini(&out);
}

static void
test_gemini_field_spellings_and_generated_ids(void **state)
{
    static const char doc[] = "{\"function_call\":1,\"functionCall\":2,\"fun\\u0063tion_call\":3,"
                              "\"function_Call\":4,\"functioncall\":5,\"x\":6}";
    struct dl_gm_field f[] = {DL_GM_FIELD("functionCall"), DL_GM_FIELD("x")};
    struct gw_arena a;
    struct dl_json j;

    (void)state;
    dl_json_init(&j, doc, sizeof(doc) - 1);
    assert_true(dl_gm_fields(&j, f, 2));
    /* lowerCamel, snake_case, escaped; not a wrong case or a missing underscore */
    assert_int_equal(f[0].count, 3);
    assert_int_equal(f[1].count, 1);
    gw_arena_init(&a);
    t_str_is(dl_gemini_call_id(&a, GW_STR_LIT("get_weather"), 3, 12), "call_get_weather_3_12");
    assert_true(dl_gemini_call_id_is_generated(GW_STR_LIT("call_get_weather_3_12"),
                                               GW_STR_LIT("get_weather")));
    assert_false(
        dl_gemini_call_id_is_generated(GW_STR_LIT("call_get_weather_3_12"), GW_STR_LIT("get")));
    assert_false(dl_gemini_call_id_is_generated(GW_STR_LIT("call_f_3_"), GW_STR_LIT("f")));
    assert_false(dl_gemini_call_id_is_generated(GW_STR_LIT("call_f_3_1x"), GW_STR_LIT("f")));
    assert_false(dl_gemini_call_id_is_generated(GW_STR_LIT("call_f__1"), GW_STR_LIT("f")));
    assert_false(dl_gemini_call_id_is_generated(GW_STR_LIT("toolu_1"), GW_STR_LIT("f")));
    gw_arena_fini(&a);
}

static void
test_gemini_models_listing(void **state)
{
    const struct dl_model_entry v[] = {
        {.id = "gemini-2.5-pro",
         .owned_by = "g",
         .context_window = 1048576,
         .max_output_tokens = 65536},
        {.id = "team/\"odd\"", .owned_by = "gw"},
    };
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(dl_gemini_models_render(v, 2, false, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"models\":[{\"name\":\"models/gemini-2.5-pro\",\"baseModelId\":"
              "\"gemini-2.5-pro\",\"version\":\"1\",\"displayName\":\"gemini-2.5-pro\","
              "\"inputTokenLimit\":1048576,\"outputTokenLimit\":65536,"
              "\"supportedGenerationMethods\":[\"generateContent\",\"streamGenerateContent\","
              "\"countTokens\"]},{\"name\":\"models/team/\\\"odd\\\"\",\"baseModelId\":"
              "\"team/\\\"odd\\\"\",\"version\":\"1\",\"displayName\":\"team/\\\"odd\\\"\","
              "\"supportedGenerationMethods\":[\"generateContent\",\"streamGenerateContent\","
              "\"countTokens\"]}]}");
    gw_buf_reset(&out);
    assert_int_equal(dl_gemini_models_render(v, 1, true, &out), GW_OK);
    assert_int_equal(out.data[0], '{');
    assert_null(strstr(out.data, "\"models\""));
    assert_non_null(strstr(out.data, "\"name\":\"models/gemini-2.5-pro\""));
    gw_buf_reset(&out);
    assert_int_equal(dl_gemini_models_render(v, 0, false, &out), GW_OK);
    t_json_eq(out.data, out.len, "{\"models\":[]}");
    gw_buf_reset(&out);
    assert_int_equal(dl_gemini_models_render(v, 0, true, &out), GW_E_INTERNAL);
    assert_int_equal(out.len, 0);
    gw_buf_fini(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemini_row_in_the_table),
        cmocka_unit_test(test_gemini_error_bodies_by_status),
        cmocka_unit_test(test_gemini_error_frame_and_empty_message),
        cmocka_unit_test(test_gemini_upstream_errors_read_and_rendered),
        cmocka_unit_test(test_gemini_field_spellings_and_generated_ids),
        cmocka_unit_test(test_gemini_models_listing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
