/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_namereg.c - the registry of objects by name behind upstream
 * health and semaphores: one zeroed object per name, kept in creation order.
 * See: core/namereg.h
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/namereg.h"

struct t_obj {
    int value;
    const char *name;
};

static void
test_namereg_one_object_per_name_created_zeroed_once(void **state)
{
    struct gw_namereg r = {0};
    const char *name = NULL;
    bool created = false;
    struct t_obj *a, *b, *again;

    (void)state;
    a = gw_namereg_get(&r, "alpha", sizeof(*a), &created, &name);
    assert_non_null(a);
    assert_true(created);
    assert_int_equal(a->value, 0);
    assert_string_equal(name, "alpha");
    a->value = 7;
    b = gw_namereg_get(&r, "beta", sizeof(*b), &created, &name);
    assert_true(created && b != a);
    again = gw_namereg_get(&r, "alpha", sizeof(*again), &created, &name);
    assert_ptr_equal(again, a);
    assert_false(created);
    assert_int_equal(again->value, 7);
    assert_string_equal(name, "alpha");
    assert_int_equal(r.n, 2);
    assert_ptr_equal(gw_namereg_at(&r, 0), a);
    assert_ptr_equal(gw_namereg_at(&r, 1), b);
    assert_null(gw_namereg_at(&r, 2));
    gw_namereg_fini(&r);
    assert_int_equal(r.n, 0);
}

/* Objects never move when the registry grows: pointers handed out stay valid. */
static void
test_namereg_objects_keep_their_address_as_it_grows(void **state)
{
    struct gw_namereg r = {0};
    const char *name;
    bool created;
    char n[16];
    struct t_obj *first = gw_namereg_get(&r, "n0", sizeof(*first), &created, &name);

    (void)state;
    for (int i = 1; i < 100; i++) {
        snprintf(n, sizeof(n), "n%d", i);
        assert_non_null(gw_namereg_get(&r, n, sizeof(struct t_obj), &created, &name));
    }
    assert_ptr_equal(gw_namereg_get(&r, "n0", sizeof(*first), &created, &name), first);
    assert_ptr_equal(gw_namereg_at(&r, 0), first);
    gw_namereg_fini(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_namereg_one_object_per_name_created_zeroed_once),
        cmocka_unit_test(test_namereg_objects_keep_their_address_as_it_grows),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
