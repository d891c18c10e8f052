/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_endpoint.c - the endpoint table (net/endpoint.c): each path and
 * method of DESIGN.md 4 to its endpoint and client shape, the Gemini model, method and
 * framing read from the URL, ?key= found among other parameters, and percent-decoding.
 * See: net/endpoint.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/endpoint.h"

static struct net_target
t_of(enum http_method m, const char *url, unsigned hints)
{
    struct net_target t;

    net_target_of(m, gw_str_c(url), hints, &t);
    return t;
}

static void
t_str_eq(struct gw_str got, const char *want)
{
    assert_int_equal(got.len, strlen(want));
    assert_memory_equal(got.ptr, want, got.len);
}

static void
test_endpoint_paths_and_shapes(void **state)
{
    (void)state;
    assert_int_equal(t_of(HTTP_POST, "/v1/chat/completions", 0).ep, NET_EP_CHAT);
    assert_int_equal(t_of(HTTP_POST, "/v1/chat/completions", 0).shape, DL_SHAPE_CHAT);
    assert_int_equal(t_of(HTTP_GET, "/v1/chat/completions", 0).ep, NET_EP_METHOD);
    assert_int_equal(t_of(HTTP_POST, "/v1/responses", 0).ep, NET_EP_RESPONSES);
    assert_int_equal(t_of(HTTP_POST, "/v1/responses?x=1", 0).shape, DL_SHAPE_RESPONSES);
    assert_int_equal(t_of(HTTP_PUT, "/v1/responses", 0).ep, NET_EP_METHOD);
    assert_int_equal(t_of(HTTP_POST, "/v1/messages", 0).ep, NET_EP_MESSAGES);
    assert_int_equal(t_of(HTTP_POST, "/v1/messages?beta=true", 0).shape, DL_SHAPE_MESSAGES);
    assert_int_equal(t_of(HTTP_POST, "/v1/messages/count_tokens", 0).ep, NET_EP_COUNT);
    assert_int_equal(t_of(HTTP_GET, "/v1/models", 0).ep, NET_EP_MODELS);
    assert_int_equal(t_of(HTTP_GET, "/v1/models", 0).shape, DL_SHAPE_CHAT);
    assert_int_equal(t_of(HTTP_GET, "/v1/models", NET_HINT_ANTHROPIC).shape, DL_SHAPE_MESSAGES);
    /* an OpenAI model id may hold ':' (fine-tuned): still the OpenAI listing */
    assert_int_equal(t_of(HTTP_GET, "/v1/models/ft:gpt-4o:org:x", 0).ep, NET_EP_MODELS);
    assert_int_equal(t_of(HTTP_GET, "/v1beta/models", 0).ep, NET_EP_GEMINI_MODELS);
    assert_int_equal(t_of(HTTP_GET, "/v1beta/models?pageSize=50", 0).shape, DL_SHAPE_GEMINI);
    /* @google/genai lists under v1 by default: a Google header or ?key= says so */
    assert_int_equal(t_of(HTTP_GET, "/v1/models", NET_HINT_GOOGLE).ep, NET_EP_GEMINI_MODELS);
    assert_int_equal(t_of(HTTP_GET, "/v1/models?key=k", 0).shape, DL_SHAPE_GEMINI);
    t_str_eq(t_of(HTTP_GET, "/v1/models/gemini-x", NET_HINT_GOOGLE).model, "gemini-x");
    assert_int_equal(t_of(HTTP_GET, "/v1/models/gemini-x", NET_HINT_GOOGLE).ep,
                     NET_EP_GEMINI_MODELS);
    assert_int_equal(t_of(HTTP_GET, "/healthz", 0).ep, NET_EP_HEALTHZ);
    assert_int_equal(t_of(HTTP_GET, "/readyz", 0).ep, NET_EP_READYZ);
    assert_int_equal(t_of(HTTP_GET, "/v1/chat", 0).ep, NET_EP_NONE);
    assert_int_equal(t_of(HTTP_POST, "/v1/responsesx", 0).ep, NET_EP_NONE);
    assert_int_equal(t_of(HTTP_GET, "", 0).ep, NET_EP_NONE);
}

static void
test_endpoint_gemini_url(void **state)
{
    struct net_target t;

    (void)state;
    t = t_of(HTTP_POST, "/v1beta/models/gemini-2.5-flash:generateContent", 0);
    assert_int_equal(t.ep, NET_EP_GEMINI);
    assert_int_equal(t.shape, DL_SHAPE_GEMINI);
    t_str_eq(t.model, "gemini-2.5-flash");
    assert_false(t.stream);
    assert_int_equal(t.key.len, 0);

    t = t_of(HTTP_POST, "/v1beta/models/g:streamGenerateContent?alt=sse&key=k%2B1", 0);
    assert_int_equal(t.ep, NET_EP_GEMINI);
    assert_true(t.stream);
    assert_true(t.alt_sse);
    t_str_eq(t.key, "k%2B1");

    /* without alt=sse a stream is a JSON array; a model with '/' and ':' in it */
    t = t_of(HTTP_POST, "/v1beta/models/org/m:v2:streamGenerateContent?key=a&alt=json", 0);
    assert_true(t.stream);
    assert_false(t.alt_sse);
    t_str_eq(t.model, "org/m:v2");
    t_str_eq(t.key, "a");

    t = t_of(HTTP_POST, "/v1/models/g:countTokens", 0);
    assert_int_equal(t.ep, NET_EP_GEMINI_COUNT);
    t_str_eq(t.model, "g");

    t = t_of(HTTP_GET, "/v1beta/models/gemini-pro", 0);
    assert_int_equal(t.ep, NET_EP_GEMINI_MODELS);
    t_str_eq(t.model, "gemini-pro");

    assert_int_equal(t_of(HTTP_GET, "/v1beta/models/g:generateContent", 0).ep, NET_EP_METHOD);
    assert_int_equal(t_of(HTTP_POST, "/v1beta/models/g:embedContent", 0).ep, NET_EP_NONE);
    assert_int_equal(t_of(HTTP_POST, "/v1beta/models/:generateContent", 0).ep, NET_EP_NONE);
    assert_int_equal(t_of(HTTP_POST, "/v1beta/models", 0).ep, NET_EP_METHOD);
    /* a parameter whose name only starts with "key" is not the key */
    t = t_of(HTTP_POST, "/v1beta/models/g:generateContent?keys=x&key", 0);
    assert_int_equal(t.key.len, 0);
    assert_true(t.key.ptr != NULL);
}

static void
test_endpoint_percent_decoding(void **state)
{
    char out[8];

    (void)state;
    assert_int_equal(gw_pct_decode(gw_str_c("a%2Bb%2f"), out, sizeof(out)), 4);
    assert_memory_equal(out, "a+b/", 4);
    assert_int_equal(gw_pct_decode(gw_str_c("%2"), out, sizeof(out)), -1);
    assert_int_equal(gw_pct_decode(gw_str_c("%zz"), out, sizeof(out)), -1);
    assert_int_equal(gw_pct_decode(gw_str_c("123456789"), out, sizeof(out)), -1);
    assert_int_equal(gw_pct_decode(gw_str_c(""), out, sizeof(out)), 0);
}

static void
test_endpoint_model_in_an_upstream_path_is_percent_encoded(void **state)
{
    struct gw_buf out = {0};
    char back[64];
    int n;

    (void)state;
    /* '/' ':' '@' and unreserved bytes stay; a space, '?', '#', '%' would end or bend
     * the path */
    assert_int_equal(net_pct_encode_path(gw_str_c("org/m:v2@x-y_z.~ a?b#c%"), &out), GW_OK);
    assert_string_equal(out.data, "org/m:v2@x-y_z.~%20a%3Fb%23c%25");
    n = gw_pct_decode((struct gw_str){out.data, out.len}, back, sizeof(back));
    assert_int_equal(n, 23);
    assert_memory_equal(back, "org/m:v2@x-y_z.~ a?b#c%", 23);
    gw_buf_fini(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint_paths_and_shapes),
        cmocka_unit_test(test_endpoint_gemini_url),
        cmocka_unit_test(test_endpoint_percent_decoding),
        cmocka_unit_test(test_endpoint_model_in_an_upstream_path_is_percent_encoded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
