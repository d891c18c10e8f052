/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_metrics.c - the per-worker request metrics: bucket choice, label
 * escaping, the series a row adds, summing tables whose names were seen in different
 * orders, the bound on names, and the exposition text of a histogram.
 * See: core/metrics.h
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/codes.h"
#include "core/metrics.h"
#include "core/str.h"

static void
row_init(struct gw_row *r, const char *client, const char *model, const char *up, int status,
         enum gw_code code)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->client, sizeof(r->client), "%s", client);
    snprintf(r->model, sizeof(r->model), "%s", model);
    snprintf(r->upstream, sizeof(r->upstream), "%s", up);
    r->status = (uint16_t)status;
    r->code = (uint16_t)code;
    r->ttfb_ms = -1;
}

static void
add_attempt(struct gw_row *r, const char *up, enum gw_outcome o)
{
    struct gw_attempt *a = &r->attempts[r->n_attempts++];

    snprintf(a->upstream, sizeof(a->upstream), "%s", up);
    a->outcome = (uint8_t)o;
}

/* The rendered text of <m>, NUL-terminated; the caller frees it with gw_buf_fini. */
static struct gw_buf
render(const struct gw_metrics *m)
{
    struct gw_buf b = {0};

    assert_int_equal(gw_metrics_render(m, &b), GW_OK);
    assert_non_null(b.data);
    return b;
}

static void
assert_has_line(const struct gw_buf *b, const char *line)
{
    char want[512];

    snprintf(want, sizeof(want), "\n%s\n", line);
    if (!strstr(b->data, want))
        fail_msg("missing line: %s\nin:\n%s", line, b->data);
}

static void
test_metrics_bucket_is_the_first_bound_at_or_above(void **state)
{
    (void)state;
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 0), 0);
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 5), 0);
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 6), 1);
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 1000), 7);
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 120000), 13);
    assert_int_equal(gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, 120001),
                     GW_METRICS_BUCKETS);
}

static void
test_metrics_label_escapes_quote_backslash_newline_and_non_ascii(void **state)
{
    struct gw_buf b = {0};
    const char in[] = "a\"b\\c\nd\xc3\xa9\x01";

    (void)state;
    assert_int_equal(gw_metrics_append_label(&b, (struct gw_str){in, sizeof(in) - 1}), GW_OK);
    assert_string_equal(b.data, "a\\\"b\\\\c\\nd???");
    gw_buf_fini(&b);
}

static void
test_metrics_histogram_text_is_cumulative_with_sum_in_seconds(void **state)
{
    static const uint32_t bounds[] = {5, 2500};
    const uint64_t counts[] = {1, 2, 3};
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(
        gw_metrics_append_histogram(&b, "h", "u=\"x\",", bounds, 2, counts, 1234567, 1000), GW_OK);
    assert_string_equal(b.data, "h_bucket{u=\"x\",le=\"0.005\"} 1\n"
                                "h_bucket{u=\"x\",le=\"2.5\"} 3\n"
                                "h_bucket{u=\"x\",le=\"+Inf\"} 6\n"
                                "h_sum{u=\"x\"} 1234.567\n"
                                "h_count{u=\"x\"} 6\n");
    gw_buf_fini(&b);
}

static void
test_metrics_row_counts_request_attempts_histograms_and_usage(void **state)
{
    struct gw_metrics *m = gw_metrics_new();
    struct gw_row r;
    struct gw_buf b;

    (void)state;
    assert_non_null(m);
    row_init(&r, "team-a", "gpt-x", "up-b", 200, GW_OK);
    add_attempt(&r, "up-a", GW_OUT_FAILED);
    add_attempt(&r, "up-b", GW_OUT_OK);
    r.duration_ms = 1200;
    r.ttfb_ms = 30;
    r.usage.input_tokens = 10;
    r.usage.output_tokens = 20;
    r.usage.cache_read_tokens = 3;
    r.cost_micros = 1500;
    gw_metrics_count_row(m, &r);
    gw_metrics_count_row(m, &r);
    b = render(m);
    assert_has_line(&b, "gw_requests_total{client=\"team-a\",model=\"gpt-x\",upstream=\"up-b\","
                        "status_class=\"2xx\",code=\"ok\"} 2");
    assert_has_line(&b, "gw_attempts_total{upstream=\"up-a\",outcome=\"failed\"} 2");
    assert_has_line(&b, "gw_attempts_total{upstream=\"up-b\",outcome=\"ok\"} 2");
    assert_has_line(&b, "gw_request_duration_seconds_bucket{upstream=\"up-b\",le=\"1\"} 0");
    assert_has_line(&b, "gw_request_duration_seconds_bucket{upstream=\"up-b\",le=\"2.5\"} 2");
    assert_has_line(&b, "gw_request_duration_seconds_sum{upstream=\"up-b\"} 2.4");
    assert_has_line(&b, "gw_request_duration_seconds_count{upstream=\"up-b\"} 2");
    assert_has_line(&b,
                    "gw_time_to_first_content_seconds_bucket{upstream=\"up-b\",le=\"0.025\"} 0");
    assert_has_line(&b, "gw_time_to_first_content_seconds_bucket{upstream=\"up-b\",le=\"0.05\"} 2");
    assert_has_line(&b, "gw_time_to_first_content_seconds_count{upstream=\"up-b\"} 2");
    assert_has_line(&b, "gw_tokens_total{client=\"team-a\",model=\"gpt-x\",kind=\"input\"} 20");
    assert_has_line(&b, "gw_tokens_total{client=\"team-a\",model=\"gpt-x\",kind=\"output\"} 40");
    assert_has_line(&b, "gw_tokens_total{client=\"team-a\",model=\"gpt-x\",kind=\"cache_read\"} 6");
    assert_has_line(&b,
                    "gw_tokens_total{client=\"team-a\",model=\"gpt-x\",kind=\"cache_write\"} 0");
    assert_has_line(&b, "gw_cost_usd_total{client=\"team-a\",model=\"gpt-x\"} 0.003000");
    /* No histogram for an upstream that never answered. */
    assert_null(strstr(b.data, "gw_request_duration_seconds_count{upstream=\"up-a\"}"));
    gw_buf_fini(&b);
    gw_metrics_free(m);
}

static void
test_metrics_unauthenticated_request_shows_no_model(void **state)
{
    struct gw_metrics *m = gw_metrics_new();
    struct gw_row r;
    struct gw_buf b;

    (void)state;
    row_init(&r, "", "sk-secret-in-model", "", 401, GW_E_AUTH_INVALID_KEY);
    gw_metrics_count_row(m, &r);
    b = render(m);
    assert_has_line(&b, "gw_requests_total{client=\"\",model=\"\",upstream=\"\","
                        "status_class=\"4xx\",code=\"gw.auth.invalid_key\"} 1");
    assert_null(strstr(b.data, "sk-secret"));
    assert_has_line(&b, "gw_request_duration_seconds_count{upstream=\"\"} 1");
    assert_null(strstr(b.data, "gw_time_to_first_content_seconds_count"));
    gw_buf_fini(&b);
    gw_metrics_free(m);
}

static void
test_metrics_add_sums_tables_that_saw_names_in_other_orders(void **state)
{
    struct gw_metrics *w1 = gw_metrics_new(), *w2 = gw_metrics_new(), *sum = gw_metrics_new();
    struct gw_row a, c;
    struct gw_buf b;

    (void)state;
    row_init(&a, "alice", "m1", "up1", 200, GW_OK);
    add_attempt(&a, "up1", GW_OUT_OK);
    a.usage.output_tokens = 7;
    row_init(&c, "carol", "m2", "up2", 502, GW_E_UPSTREAM_FAILED);
    add_attempt(&c, "up2", GW_OUT_FAILED);
    gw_metrics_count_row(w1, &a);
    gw_metrics_count_row(w1, &c);
    gw_metrics_count_row(w2, &c); /* w2 meets carol first: other ids */
    gw_metrics_count_row(w2, &a);
    gw_metrics_count_row(w2, &a);
    gw_metrics_add(sum, w1);
    gw_metrics_add(sum, w2);
    b = render(sum);
    assert_has_line(&b, "gw_requests_total{client=\"alice\",model=\"m1\",upstream=\"up1\","
                        "status_class=\"2xx\",code=\"ok\"} 3");
    assert_has_line(&b, "gw_requests_total{client=\"carol\",model=\"m2\",upstream=\"up2\","
                        "status_class=\"5xx\",code=\"gw.upstream.failed\"} 2");
    assert_has_line(&b, "gw_attempts_total{upstream=\"up1\",outcome=\"ok\"} 3");
    assert_has_line(&b, "gw_attempts_total{upstream=\"up2\",outcome=\"failed\"} 2");
    assert_has_line(&b, "gw_request_duration_seconds_count{upstream=\"up1\"} 3");
    assert_has_line(&b, "gw_tokens_total{client=\"alice\",model=\"m1\",kind=\"output\"} 21");
    gw_buf_fini(&b);
    gw_metrics_free(w1);
    gw_metrics_free(w2);
    gw_metrics_free(sum);
}

static void
test_metrics_names_beyond_the_bound_count_as_other(void **state)
{
    struct gw_metrics *m = gw_metrics_new();
    struct gw_row r;
    struct gw_buf b;
    char model[32];
    int i;

    (void)state;
    for (i = 0; i < 2 * GW_METRICS_MAX_NAMES; i++) {
        snprintf(model, sizeof(model), "model-%d", i);
        row_init(&r, "k", model, "up", 200, GW_OK);
        gw_metrics_count_row(m, &r);
    }
    b = render(m);
    /* 255 names of their own (id 0 is _other), the rest under _other. */
    assert_has_line(&b, "gw_requests_total{client=\"k\",model=\"model-0\",upstream=\"up\","
                        "status_class=\"2xx\",code=\"ok\"} 1");
    assert_has_line(&b, "gw_requests_total{client=\"k\",model=\"_other\",upstream=\"up\","
                        "status_class=\"2xx\",code=\"ok\"} 257");
    assert_null(strstr(b.data, "model=\"model-300\""));
    assert_has_line(&b, "gw_request_duration_seconds_count{upstream=\"up\"} 512");
    gw_buf_fini(&b);
    gw_metrics_free(m);
}

static void
test_metrics_series_beyond_the_table_count_as_other(void **state)
{
    struct gw_metrics *m = gw_metrics_new();
    struct gw_row r;
    struct gw_buf b;
    char client[16], model[16];
    int i, j;
    unsigned long long other = 0;
    const char *p;

    (void)state;
    /* 100 x 40 distinct series, more than the table keeps. */
    for (i = 0; i < 100; i++)
        for (j = 0; j < 40; j++) {
            snprintf(client, sizeof(client), "c%d", i);
            snprintf(model, sizeof(model), "m%d", j);
            row_init(&r, client, model, "up", 200, GW_OK);
            gw_metrics_count_row(m, &r);
        }
    b = render(m);
    p = strstr(b.data, "gw_requests_total{client=\"_other\",model=\"_other\",upstream=\"_other\","
                       "status_class=\"2xx\",code=\"ok\"} ");
    assert_non_null(p);
    other = strtoull(strchr(p, '}') + 2, NULL, 10);
    assert_true(other > 0 && other < 4000);
    assert_has_line(&b, "gw_request_duration_seconds_count{upstream=\"up\"} 4000");
    gw_buf_fini(&b);
    gw_metrics_free(m);
}

/* ---- one worker counting while a scrape sums ---- */

#define T_ROWS 20000

static void *
count_rows(void *arg)
{
    struct gw_metrics *m = arg;
    struct gw_row r;
    char client[16];
    int i;

    for (i = 0; i < T_ROWS; i++) {
        snprintf(client, sizeof(client), "c%d", i % 50); /* new names and series meanwhile */
        row_init(&r, client, "m", "up", 200, GW_OK);
        add_attempt(&r, "up", GW_OUT_OK);
        r.usage.output_tokens = 1;
        gw_metrics_count_row(m, &r);
    }
    return NULL;
}

/* The +Inf bucket of gw_request_duration_seconds{upstream="up"} in <m>'s text, 0 when
 * the series is not there yet. */
static unsigned long long
count_of(const struct gw_metrics *m)
{
    struct gw_buf b = render(m);
    const char *p = strstr(b.data, "gw_request_duration_seconds_count{upstream=\"up\"} ");
    unsigned long long n = p ? strtoull(strchr(p, '}') + 2, NULL, 10) : 0;

    gw_buf_fini(&b);
    return n;
}

static void
test_metrics_sums_a_table_while_its_owner_counts(void **state)
{
    struct gw_metrics *w = gw_metrics_new();
    unsigned long long last = 0, n;
    pthread_t t;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, count_rows, w), 0);
    do {
        struct gw_metrics *sum = gw_metrics_new();

        gw_metrics_add(sum, w);
        n = count_of(sum);
        assert_true(n >= last && n <= T_ROWS); /* never backwards, never invented */
        last = n;
        gw_metrics_free(sum);
    } while (n < T_ROWS); /* the owner gets there: every row is counted */
    pthread_join(t, NULL);
    {
        struct gw_metrics *sum = gw_metrics_new();
        struct gw_buf b;

        gw_metrics_add(sum, w);
        assert_int_equal(count_of(sum), T_ROWS);
        b = render(sum);
        assert_has_line(&b, "gw_attempts_total{upstream=\"up\",outcome=\"ok\"} 20000");
        assert_has_line(&b, "gw_tokens_total{client=\"c7\",model=\"m\",kind=\"output\"} 400");
        gw_buf_fini(&b);
        gw_metrics_free(sum);
    }
    gw_metrics_free(w);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_bucket_is_the_first_bound_at_or_above),
        cmocka_unit_test(test_metrics_label_escapes_quote_backslash_newline_and_non_ascii),
        cmocka_unit_test(test_metrics_histogram_text_is_cumulative_with_sum_in_seconds),
        cmocka_unit_test(test_metrics_row_counts_request_attempts_histograms_and_usage),
        cmocka_unit_test(test_metrics_unauthenticated_request_shows_no_model),
        cmocka_unit_test(test_metrics_add_sums_tables_that_saw_names_in_other_orders),
        cmocka_unit_test(test_metrics_names_beyond_the_bound_count_as_other),
        cmocka_unit_test(test_metrics_series_beyond_the_table_count_as_other),
        cmocka_unit_test(test_metrics_sums_a_table_while_its_owner_counts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
