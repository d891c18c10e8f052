/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_quota_learn.c - what upstreams say about their quotas, as a table:
 * error bodies and rate-limit headers of OpenAI, Groq, Anthropic, Gemini, OpenRouter,
 * Cerebras and Mistral in the forms they are met in (organisation ids replaced), each
 * with the facts that must be learned from it, and nothing else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/quota_learn.h"

/* 2026-11-30T04:00:00Z */
#define NOW 1796011200000ull

struct t_hdr {
    const char *name, *value;
};

struct t_want {
    enum gw_quota_win win;
    uint64_t limit;
    int64_t remaining;
    uint64_t reset_ms;
    const char *origin; /* a prefix of the expected origin; NULL when no limit */
};

struct t_case {
    const char *name;
    enum gw_quota_vendor vendor;
    struct t_hdr h[8];
    const char *body;
    size_t n_want;
    struct t_want want[4];
    bool day_exhausted;
    uint64_t retry_after_ms;
};

static const struct t_case cases[] = {
    {
        .name = "groq: TPM line with a limit, used and requested",
        .body = "{\"error\":{\"message\":\"Rate limit reached for model `llama3-70b-8192` in "
                "organization `org_x` on tokens per minute (TPM): Limit 5000, Used 5747, "
                "Requested ~4251. Please try again in 59.977s. Visit "
                "https://console.groq.com/docs/rate-limits for more information.\",\"type\":"
                "\"tokens\",\"code\":\"rate_limit_exceeded\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 5000, -1, 0, "body: tokens per min"}},
        .retry_after_ms = 59977,
    },
    {
        .name = "groq: Limit 30000, Requested 33476 (a request larger than the TPM)",
        .body = "{\"error\":{\"message\":\"Request too large for model `llama-3.3-70b-versatile` "
                "in organization `org_x` service tier `on_demand` on tokens per minute (TPM): "
                "Limit 30000, Requested 33476, please reduce your message size and try "
                "again.\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 30000, -1, 0, "body: tokens per min"}},
    },
    {
        .name = "groq: the day quota (TPD), with a Go duration to wait",
        .body = "{\"error\":{\"message\":\"Rate limit reached for model `llama-3.3-70b-versatile` "
                "in organization `org_x` service tier `on_demand` on tokens per day (TPD): "
                "Limit 100000, Used 99190, Requested 1339. Please try again in 2m12.5s.\","
                "\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPD, 100000, -1, 0, "body: tokens per day"}},
        .day_exhausted = true,
        .retry_after_ms = 132500,
    },
    {
        .name = "groq: headers (requests are per day at Groq)",
        .vendor = GW_QUOTA_VENDOR_GROQ,
        .h = {{"retry-after", "2"},
              {"x-ratelimit-limit-requests", "14400"},
              {"x-ratelimit-limit-tokens", "18000"},
              {"x-ratelimit-remaining-requests", "14370"},
              {"x-ratelimit-remaining-tokens", "17997"},
              {"x-ratelimit-reset-requests", "2m59.56s"},
              {"x-ratelimit-reset-tokens", "7.66s"}},
        .n_want = 2,
        .want = {{GW_QUOTA_RPD, 14400, 14370, 179560, "x-ratelimit-limit-requests"},
                 {GW_QUOTA_TPM, 18000, 17997, 7660, "x-ratelimit-limit-tokens"}},
        .retry_after_ms = 2000,
    },
    {
        .name = "openai: TPM line, wait in ms",
        .body = "{\"error\":{\"message\":\"Rate limit reached for gpt-4o in organization org-x "
                "on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try "
                "again in 644ms. Visit https://platform.openai.com/account/rate-limits to learn "
                "more.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 30000, -1, 0, "body: tokens per min"}},
        .retry_after_ms = 644,
    },
    {
        .name = "openai: RPM line",
        .body = "{'error': {'message': 'Rate limit reached for gpt-3.5-turbo in organization "
                "org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try "
                "again in 20s. Visit https://platform.openai.com/account/rate-limits to learn "
                "more.', 'type': 'requests', 'param': None, 'code': 'rate_limit_exceeded'}}",
        .n_want = 1,
        .want = {{GW_QUOTA_RPM, 3, -1, 0, "body: requests per min"}},
        .retry_after_ms = 20000,
    },
    {
        .name = "openai (older): Limit: 10000 / min on tokens",
        .body = "{\"error\":{\"message\":\"Rate limit reached for 10KTPM-200RPM in organization "
                "org-x on tokens per min. Limit: 10000 / min. Please try again in 6ms. Contact "
                "us through our help center at help.openai.com if you continue to have "
                "issues.\",\"type\":\"tokens\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 10000, -1, 0, "body: tokens per min"}},
        .retry_after_ms = 6,
    },
    {
        .name = "openai (older): Limit: 200 / min requests",
        .body = "Rate limit reached for default-global-with-image-limits in organization org-x "
                "on requests per min. Limit: 200.000000 / min. Current: 210.000000 / min. "
                "Contact support@openai.com if you continue to have issues.",
        .n_want = 1,
        .want = {{GW_QUOTA_RPM, 200, -1, 0, "body: requests per min"}},
    },
    {
        .name = "openai: headers, Go-duration resets",
        .h = {{"x-ratelimit-limit-requests", "200"},
              {"x-ratelimit-remaining-requests", "0"},
              {"x-ratelimit-reset-requests", "6m0s"},
              {"x-ratelimit-limit-tokens", "40000"},
              {"x-ratelimit-remaining-tokens", "18000"},
              {"x-ratelimit-reset-tokens", "20ms"}},
        .n_want = 2,
        .want = {{GW_QUOTA_RPM, 200, 0, 360000, "x-ratelimit-limit-requests"},
                 {GW_QUOTA_TPM, 40000, 18000, 20, "x-ratelimit-limit-tokens"}},
    },
    {
        .name = "anthropic: input tokens per minute in the body, RFC 3339 resets",
        .h = {{"retry-after", "30"},
              {"anthropic-ratelimit-requests-limit", "50"},
              {"anthropic-ratelimit-requests-remaining", "0"},
              {"anthropic-ratelimit-requests-reset", "2026-11-30T04:00:30Z"},
              {"anthropic-ratelimit-output-tokens-limit", "8000"}},
        .body = "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This "
                "request would exceed the rate limit for your organization (x) of 30,000 input "
                "tokens per minute. For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits. You can see the response headers "
                "for current usage. Please reduce the prompt length or the maximum tokens "
                "requested, or try again later.\"}}",
        .n_want = 2,
        .want = {{GW_QUOTA_RPM, 50, 0, 30000, "anthropic-ratelimit-requests-limit"},
                 {GW_QUOTA_TPM, 30000, -1, 0, "body: input tokens per minute"}},
        .retry_after_ms = 30000,
    },
    {
        .name = "anthropic: input-tokens headers with a fractional RFC 3339 reset",
        .h = {{"anthropic-ratelimit-input-tokens-limit", "400000"},
              {"anthropic-ratelimit-input-tokens-remaining", "0"},
              {"anthropic-ratelimit-input-tokens-reset", "2026-11-30T04:00:01.500Z"}},
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 400000, 0, 1500, "anthropic-ratelimit-input-tokens-limit"}},
    },
    {
        .name = "gemini: QuotaFailure with a quotaValue, wrapped and escaped by a proxy",
        .body =
            "{\"error\":{\"message\":\"{\\n  \\\"error\\\": {\\n    \\\"code\\\": 429,\\n    "
            "\\\"message\\\": \\\"You exceeded your current quota, please check your plan "
            "and billing details.\\\",\\n    \\\"status\\\": \\\"RESOURCE_EXHAUSTED\\\",\\n    "
            "\\\"details\\\": [\\n      {\\n        \\\"@type\\\": "
            "\\\"type.googleapis.com/google.rpc.QuotaFailure\\\",\\n        \\\"violations\\\": "
            "[\\n          {\\n            \\\"quotaMetric\\\": "
            "\\\"generativelanguage.googleapis.com/generate_content_free_tier_input_token_"
            "count\\\",\\n            \\\"quotaId\\\": "
            "\\\"GenerateContentInputTokensPerModelPerMinute-FreeTier\\\",\\n            "
            "\\\"quotaDimensions\\\": {\\n              \\\"location\\\": \\\"global\\\",\\n   "
            "           \\\"model\\\": \\\"gemini-2.5-flash\\\"\\n            },\\n            "
            "\\\"quotaValue\\\": \\\"250000\\\"\\n          }\\n        ]\\n      },\\n      "
            "{\\n        \\\"@type\\\": \\\"type.googleapis.com/google.rpc.RetryInfo\\\",\\n   "
            "     \\\"retryDelay\\\": \\\"26s\\\"\\n      }\\n    ]\\n  }\\n}\\n\",\"code\":429,"
            "\"status\":\"Too Many Requests\"}}",
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 250000, -1, 0, "body: quotaId generatecontentinputtokens"}},
        .retry_after_ms = 26000,
    },
    {
        .name = "gemini: per-day and per-minute requests named, no values",
        .body = "{\"error\":{\"code\":429,\"message\":\"You exceeded your current quota.\","
                "\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
                "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaMetric\":"
                "\"generativelanguage.googleapis.com/generate_content_free_tier_requests\","
                "\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\","
                "\"quotaDimensions\":{\"location\":\"global\",\"model\":\"gemini-2.0-flash\"}},"
                "{\"quotaMetric\":\"generativelanguage.googleapis.com/"
                "generate_content_free_tier_requests\",\"quotaId\":"
                "\"GenerateRequestsPerMinutePerProjectPerModel-FreeTier\"}]},{\"@type\":"
                "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"47s\"}]}}",
        .n_want = 0,
        .day_exhausted = true,
        .retry_after_ms = 47000,
    },
    {
        .name = "gemini: a per-day quota with its value",
        .body = "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{"
                "\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{"
                "\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\","
                "\"quotaDimensions\":{\"model\":\"gemini-2.5-pro\",\"location\":\"global\"},"
                "\"quotaValue\":\"50\"}]}]}}",
        .n_want = 1,
        .want = {{GW_QUOTA_RPD, 50, -1, 0, "body: quotaId generaterequestsperday"}},
        .day_exhausted = true,
    },
    {
        .name = "google code assist: limit named per day, no number",
        .body = "{\"error\":{\"code\":429,\"message\":\"Quota exceeded for quota metric 'Gemini "
                "2.5 Pro Requests' and limit 'Gemini 2.5 Pro Requests per day per user per tier' "
                "of service 'cloudcode-pa.googleapis.com' for consumer 'project_number:1'.\","
                "\"status\":\"RESOURCE_EXHAUSTED\"}}",
        .n_want = 0,
        .day_exhausted = true,
    },
    {
        .name = "openrouter: free-models-per-day with X-RateLimit-* in metadata.headers",
        .body = "{\"error\":{\"message\":\"Rate limit exceeded: free-models-per-day. Add 10 "
                "credits to unlock 1000 free model requests per day\",\"code\":429,\"metadata\":{"
                "\"headers\":{\"X-RateLimit-Limit\":\"50\",\"X-RateLimit-Remaining\":\"0\","
                "\"X-RateLimit-Reset\":\"1796025600000\"},\"provider_name\":null}},"
                "\"user_id\":\"user_x\"}",
        .n_want = 1,
        .want = {{GW_QUOTA_RPD, 50, 0, 14400000, "x-ratelimit-limit"}},
        .day_exhausted = true,
    },
    {
        .name = "openrouter: free-models-per-min with the plain headers",
        .h = {{"X-RateLimit-Limit", "20"},
              {"X-RateLimit-Remaining", "0"},
              {"X-RateLimit-Reset", "1796011212000"}},
        .body = "{\"error\":{\"message\":\"Rate limit exceeded: free-models-per-min. \","
                "\"code\":429}}",
        .n_want = 1,
        .want = {{GW_QUOTA_RPM, 20, 0, 12000, "x-ratelimit-limit"}},
    },
    {
        .name = "openrouter: plain headers without a window named are not learned",
        .h = {{"X-RateLimit-Limit", "20"}, {"X-RateLimit-Remaining", "0"}},
        .body = "{\"error\":{\"message\":\"Provider returned error\",\"code\":429}}",
        .n_want = 0,
    },
    {
        .name = "cerebras: per-minute and per-day headers, TPM body",
        .h = {{"x-ratelimit-limit-requests-day", "14400"},
              {"x-ratelimit-limit-tokens-minute", "60000"},
              {"x-ratelimit-remaining-requests-day", "14399"},
              {"x-ratelimit-remaining-tokens-minute", "0"},
              {"x-ratelimit-reset-requests-day", "33011.382867097855"},
              {"x-ratelimit-reset-tokens-minute", "11.382867097855"}},
        .body = "{\"message\":\"Tokens per minute limit exceeded - too many tokens processed.\","
                "\"type\":\"too_many_tokens_error\",\"param\":\"quota\",\"code\":"
                "\"token_quota_exceeded\"}",
        .n_want = 2,
        .want = {{GW_QUOTA_RPD, 14400, 14399, 33011382, "x-ratelimit-limit-requests-day"},
                 {GW_QUOTA_TPM, 60000, 0, 11382, "x-ratelimit-limit-tokens-minute"}},
    },
    {
        .name = "cerebras: the day quota spent",
        .body = "{\"message\":\"Requests per day limit exceeded - too many requests sent.\","
                "\"type\":\"too_many_requests_error\",\"param\":\"quota\",\"code\":"
                "\"request_quota_exceeded\"}",
        .n_want = 0,
        .day_exhausted = true,
    },
    {
        .name = "mistral: -minute headers (req and tokens), -month ignored",
        .h = {{"x-ratelimit-limit-tokens-minute", "5000000"},
              {"x-ratelimit-remaining-tokens-minute", "4999911"},
              {"x-ratelimit-tokens-query-cost", "52"},
              {"x-ratelimit-limit-req-minute", "720"},
              {"x-ratelimit-remaining-req-minute", "717"},
              {"x-ratelimit-limit-tokens-month", "1000000000"}},
        .body = "{\"object\":\"error\",\"message\":\"Rate limit exceeded\",\"type\":"
                "\"rate_limited\",\"param\":null,\"code\":\"1300\"}",
        .n_want = 2,
        .want = {{GW_QUOTA_TPM, 5000000, 4999911, 0, "x-ratelimit-limit-tokens-minute"},
                 {GW_QUOTA_RPM, 720, 717, 0, "x-ratelimit-limit-req-minute"}},
    },
    {
        .name = "mistral: a bare message states nothing",
        .body = "{\"message\":\"Requests rate limit exceeded\"}",
        .n_want = 0,
    },
    {
        .name = "a limit without a clear window is not learned",
        .body = "{\"error\":{\"message\":\"Limit 30000 exceeded for your key\"}}",
        .n_want = 0,
    },
    {
        .name = "Retry-After as an HTTP date, retry-after-ms, epoch-second reset",
        .h = {{"Retry-After", "Mon, 30 Nov 2026 04:01:00 GMT"},
              {"retry-after-ms", "1500"},
              {"x-ratelimit-remaining-tokens", "0"},
              {"x-ratelimit-reset-tokens", "1796011230"}},
        .n_want = 1,
        .want = {{GW_QUOTA_TPM, 0, 0, 30000, NULL}},
        .retry_after_ms = 60000,
    },
};

static void
t_check(const struct t_case *c)
{
    struct gw_quota_header h[8];
    struct gw_quota_facts f;
    size_t n = 0;

    for (; n < 8 && c->h[n].name; n++) {
        h[n].name = gw_str_c(c->h[n].name);
        h[n].value = gw_str_c(c->h[n].value);
    }
    gw_quota_learn(c->vendor, h, n, gw_str_c(c->body), NOW, &f);
    print_message("case: %s\n", c->name);
    assert_int_equal(f.n, c->n_want);
    for (size_t i = 0; i < c->n_want; i++) {
        const struct t_want *w = &c->want[i];
        const struct gw_quota_fact *x = NULL;

        for (size_t k = 0; k < f.n; k++)
            if (f.f[k].win == w->win)
                x = &f.f[k];
        assert_non_null(x);
        assert_int_equal(x->limit, w->limit);
        assert_int_equal(x->remaining, w->remaining);
        assert_int_equal(x->reset_ms, w->reset_ms);
        if (w->origin)
            assert_int_equal(strncmp(x->origin, w->origin, strlen(w->origin)), 0);
    }
    assert_int_equal(f.day_exhausted, c->day_exhausted);
    assert_int_equal(f.retry_after_ms, c->retry_after_ms);
}

static void
test_quota_learn_table_of_real_bodies_and_headers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        t_check(&cases[i]);
}

static void
test_quota_learn_reset_forms(void **state)
{
    (void)state;
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("1s"), NOW), 1000);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("6m0s"), NOW), 360000);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("20ms"), NOW), 20);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("1h2m3.5s"), NOW), 3723500);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("11.5"), NOW), 11500);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("1796011260"), NOW), 60000);  /* epoch s */
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("1796011200250"), NOW), 250); /* epoch ms */
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("2026-11-30T05:00:00+01:00"), NOW), 0);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("2026-11-30T04:00:10+00:00"), NOW), 10000);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("2026-11-30T03:00:00Z"), NOW), 0); /* past */
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("soon"), NOW), 0);
    assert_int_equal(gw_quota_reset_ms(GW_STR_LIT("5x"), NOW), 0);
}

static void
test_quota_learn_vendor_of_host(void **state)
{
    (void)state;
    assert_int_equal(gw_quota_vendor_of_host("api.groq.com"), GW_QUOTA_VENDOR_GROQ);
    assert_int_equal(gw_quota_vendor_of_host("groq.com"), GW_QUOTA_VENDOR_GROQ);
    assert_int_equal(gw_quota_vendor_of_host("notgroq.com"), GW_QUOTA_VENDOR_GENERIC);
    assert_int_equal(gw_quota_vendor_of_host("api.openai.com"), GW_QUOTA_VENDOR_GENERIC);
    assert_int_equal(gw_quota_vendor_of_host(NULL), GW_QUOTA_VENDOR_GENERIC);
}

static void
test_quota_learn_smallest_stated_limit_wins_with_its_origin(void **state)
{
    struct gw_quota_header h[] = {
        {GW_STR_LIT("x-ratelimit-limit-tokens"), GW_STR_LIT("40000")},
    };
    struct gw_quota_facts f;

    (void)state;
    gw_quota_learn(GW_QUOTA_VENDOR_GENERIC, h, 1,
                   GW_STR_LIT("on tokens per min (TPM): Limit 30000, Used 1, Requested 2"), NOW,
                   &f);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.f[0].limit, 30000);
    assert_string_equal(f.f[0].origin, "body: tokens per min");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_learn_table_of_real_bodies_and_headers),
        cmocka_unit_test(test_quota_learn_reset_forms),
        cmocka_unit_test(test_quota_learn_vendor_of_host),
        cmocka_unit_test(test_quota_learn_smallest_stated_limit_wins_with_its_origin),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
