/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_budget.c - the server-wide byte budget: takes within the maximum,
 * a take past it takes nothing, give-backs make room, no maximum, a lowered maximum,
 * and two threads taking and giving without ever passing the maximum.
 * Threads: single-threaded except test_budget_threads_never_pass_max.
 * See: core/budget.c
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/budget.h"

static void
test_budget_take_within_max(void **state)
{
    struct gw_budget b = {0, 0};

    (void)state;
    gw_budget_set_max(&b, 100);
    assert_true(gw_budget_take(&b, 60));
    assert_true(gw_budget_take(&b, 40));
    assert_int_equal(gw_budget_used(&b), 100);
}

static void
test_budget_take_past_max_takes_nothing(void **state)
{
    struct gw_budget b = {0, 0};

    (void)state;
    gw_budget_set_max(&b, 100);
    assert_true(gw_budget_take(&b, 60));
    assert_false(gw_budget_take(&b, 41));
    assert_int_equal(gw_budget_used(&b), 60);
    assert_false(gw_budget_take(&b, UINT64_MAX)); /* no wrap-around */
    assert_int_equal(gw_budget_used(&b), 60);
    gw_budget_give(&b, 60);
    assert_true(gw_budget_take(&b, 100));
}

static void
test_budget_no_max_takes_anything(void **state)
{
    struct gw_budget b = {0, 0};

    (void)state;
    assert_true(gw_budget_take(&b, 1u << 30));
    assert_true(gw_budget_take(&b, 1u << 30));
    assert_int_equal(gw_budget_used(&b), 2ull << 30);
}

static void
test_budget_lowered_max_keeps_what_was_taken(void **state)
{
    struct gw_budget b = {0, 0};

    (void)state;
    gw_budget_set_max(&b, 100);
    assert_true(gw_budget_take(&b, 80));
    gw_budget_set_max(&b, 50);
    assert_false(gw_budget_take(&b, 1));
    gw_budget_give(&b, 40);
    assert_true(gw_budget_take(&b, 10));
    assert_int_equal(gw_budget_used(&b), 50);
}

#define T_ROUNDS 200000

struct t_arg {
    struct gw_budget *b;
    uint64_t seen_over; /* a take that left more than max in use */
};

static void *
t_hammer(void *p)
{
    struct t_arg *a = p;
    unsigned i;

    for (i = 0; i < T_ROUNDS; i++) {
        uint64_t n = 1 + i % 7;

        if (gw_budget_take(a->b, n)) {
            if (gw_budget_used(a->b) > 10)
                a->seen_over++;
            gw_budget_give(a->b, n);
        }
    }
    return NULL;
}

static void
test_budget_threads_never_pass_max(void **state)
{
    struct gw_budget b = {0, 0};
    struct t_arg a[2] = {{&b, 0}, {&b, 0}};
    pthread_t t[2];
    int i;

    (void)state;
    gw_budget_set_max(&b, 10);
    for (i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, t_hammer, &a[i]), 0);
    for (i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(a[0].seen_over + a[1].seen_over, 0);
    assert_int_equal(gw_budget_used(&b), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_take_within_max),
        cmocka_unit_test(test_budget_take_past_max_takes_nothing),
        cmocka_unit_test(test_budget_no_max_takes_anything),
        cmocka_unit_test(test_budget_lowered_max_keeps_what_was_taken),
        cmocka_unit_test(test_budget_threads_never_pass_max),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
