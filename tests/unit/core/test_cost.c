/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_cost.c - pricing usage in micro-dollars.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/cost.h"

static struct gw_model_spec
spec(double in, double out, double cr, double cw)
{
    struct gw_model_spec s;

    memset(&s, 0, sizeof(s));
    s.input = in;
    s.output = out;
    s.cache_read = cr;
    s.cache_write = cw;
    s.input_known = in >= 0;
    s.output_known = out >= 0;
    s.cache_read_known = cr >= 0;
    s.cache_write_known = cw >= 0;
    return s;
}

static void
test_cost_prices_each_kind_of_token(void **state)
{
    /* gpt-4.1-like: $2 in, $8 out, $0.50 cache read, $2 cache write per 1M tokens */
    struct gw_model_spec s = spec(2.0, 8.0, 0.5, 2.0);
    struct gw_usage u = {1000, 500, 2000, 100, 0, false};
    bool priced = false;

    (void)state;
    /* 1000*2 + 500*8 + 2000*0.5 + 100*2 = 7200 micro-dollars */
    assert_int_equal(gw_cost_micros(&s, &u, &priced), 7200);
    assert_true(priced);
}

static void
test_cost_cache_without_price_costs_the_input_price(void **state)
{
    struct gw_model_spec s = spec(3.0, 15.0, -1, -1);
    struct gw_usage u = {0, 0, 10, 20, 0, false};

    (void)state;
    assert_int_equal(gw_cost_micros(&s, &u, NULL), 90);
}

static void
test_cost_unpriced_model_is_zero(void **state)
{
    struct gw_model_spec s = spec(-1, 8.0, -1, -1);
    struct gw_usage u = {1000, 1000, 0, 0, 0, false};
    bool priced = true;

    (void)state;
    assert_int_equal(gw_cost_micros(&s, &u, &priced), 0);
    assert_false(priced);
}

static void
test_cost_rounds_to_the_nearest_micro_dollar(void **state)
{
    struct gw_model_spec s = spec(0.15, 0.6, -1, -1);
    struct gw_usage u = {3, 1, 0, 0, 0, false};

    (void)state;
    /* 3*0.15 + 0.6 = 1.05 -> 1 */
    assert_int_equal(gw_cost_micros(&s, &u, NULL), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_prices_each_kind_of_token),
        cmocka_unit_test(test_cost_cache_without_price_costs_the_input_price),
        cmocka_unit_test(test_cost_unpriced_model_is_zero),
        cmocka_unit_test(test_cost_rounds_to_the_nearest_micro_dollar),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
