/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_events.c - the operator event ring: order, names, copies, drops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/alloc.h"
#include "core/events.h"

static void
test_events_come_out_in_order_with_their_names(void **state)
{
    enum gw_event_name e;
    char *a, *b;
    char doc[] = "{\"n\":1}";

    (void)state;
    gw_events_init();
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, doc);
    doc[5] = '2'; /* the ring keeps its own copy */
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, doc);
    a = gw_event_take(&e);
    assert_non_null(a); /* NULL under `make test-oom`; cmocka's strcmp would crash */
    assert_string_equal(a, "{\"n\":1}");
    assert_string_equal(gw_event_str(e), "key_limit_alert");
    b = gw_event_take(&e);
    assert_non_null(b);
    assert_string_equal(b, "{\"n\":2}");
    assert_null(gw_event_take(&e));
    gw_free(a);
    gw_free(b);
}

static void
test_events_full_ring_drops_and_counts(void **state)
{
    enum gw_event_name e;
    uint64_t before;
    char *x;
    int i;

    (void)state;
    gw_events_init();
    before = gw_events_dropped();
    for (i = 0; i < 1100; i++)
        gw_event_push(GW_EV_KEY_LIMIT_ALERT, "{}");
    assert_int_equal(gw_events_dropped() - before, 1100 - 1023);
    for (i = 0; i < 1023; i++) {
        x = gw_event_take(&e);
        assert_non_null(x);
        gw_free(x);
    }
    assert_null(gw_event_take(&e));
}

/* Issue 9 (make test-oom): out of memory for the copy of the first event returned NULL,
 * which the control thread reads as "none left", and lost the event uncounted. */
static void
test_issue_9_take_out_of_memory_drops_that_event_and_goes_on(void **state)
{
    enum gw_event_name e;
    uint64_t before;
    char *x;

    (void)state;
    gw_events_init();
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, "{\"n\":1}");
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, "{\"n\":2}");
    before = gw_events_dropped();
    gw_alloc_fail_at(1); /* the copy of the first */
    x = gw_event_take(&e);
    gw_alloc_fail_at(0);
    assert_non_null(x);
    assert_string_equal(x, "{\"n\":2}");
    assert_int_equal(gw_events_dropped() - before, 1);
    assert_null(gw_event_take(&e));
    gw_free(x);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_come_out_in_order_with_their_names),
        cmocka_unit_test(test_events_full_ring_drops_and_counts),
        cmocka_unit_test(test_issue_9_take_out_of_memory_drops_that_event_and_goes_on),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
