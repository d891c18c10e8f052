/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_events.c - the operator event rings (order, names, copies, drops
 * counted per name, the priority ring ahead of a request_finished burst), a subscriber's
 * filter (types, client, sample) and the sampling the workers read.
 * See: core/events.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/events.h"

static void
test_events_come_out_in_order_with_their_names(void **state)
{
    struct gw_event *a, *b;
    char doc[] = "{\"n\":1}";

    (void)state;
    gw_events_init();
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, doc);
    doc[5] = '2'; /* the ring keeps its own copy */
    gw_event_push_about(GW_EV_UPSTREAM_PAUSED, "alice", "0123abcd", doc);
    a = gw_event_take();
    assert_non_null(a); /* NULL under `make test-oom`; cmocka's strcmp would crash */
    assert_string_equal(a->json, "{\"n\":1}");
    assert_string_equal(gw_event_str(a->name), "key_limit_alert");
    assert_string_equal(a->client, "");
    b = gw_event_take();
    assert_non_null(b);
    assert_string_equal(b->json, "{\"n\":2}");
    assert_string_equal(gw_event_str(b->name), "upstream_paused");
    assert_string_equal(b->client, "alice");
    assert_string_equal(b->id, "0123abcd");
    assert_null(gw_event_take());
    gw_free(a);
    gw_free(b);
}

static void
test_events_full_ring_drops_and_counts_per_name(void **state)
{
    uint64_t before, before_rf;
    struct gw_event *x;
    int i;

    (void)state;
    gw_events_init();
    before = gw_events_dropped_of(GW_EV_KEY_LIMIT_ALERT);
    before_rf = gw_events_dropped_of(GW_EV_REQUEST_FINISHED);
    for (i = 0; i < 1100; i++)
        gw_event_push(GW_EV_KEY_LIMIT_ALERT, "{}");
    assert_int_equal(gw_events_dropped_of(GW_EV_KEY_LIMIT_ALERT) - before, 1100 - 1023);
    assert_int_equal(gw_events_dropped_of(GW_EV_REQUEST_FINISHED) - before_rf, 0);
    for (i = 0; i < 1023; i++) {
        x = gw_event_take();
        assert_non_null(x);
        gw_free(x);
    }
    assert_null(gw_event_take());
}

/* A burst of request_finished fills its own ring: the rare events queued after it are
 * neither dropped nor kept waiting behind it. */
static void
test_events_request_burst_cannot_crowd_out_rare_events(void **state)
{
    uint64_t rf0, paused0, total0;
    struct gw_event *x;
    int i, n;

    (void)state;
    gw_events_init();
    rf0 = gw_events_dropped_of(GW_EV_REQUEST_FINISHED);
    paused0 = gw_events_dropped_of(GW_EV_UPSTREAM_PAUSED);
    total0 = gw_events_dropped();
    for (i = 0; i < 5000; i++)
        gw_event_push_about(GW_EV_REQUEST_FINISHED, "alice", "id", "{}");
    gw_event_push(GW_EV_UPSTREAM_PAUSED, "{\"p\":1}");
    gw_event_push(GW_EV_UPSTREAM_RESUMED, "{\"p\":2}");
    assert_int_equal(gw_events_dropped_of(GW_EV_REQUEST_FINISHED) - rf0, 5000 - 4095);
    assert_int_equal(gw_events_dropped_of(GW_EV_UPSTREAM_PAUSED) - paused0, 0);
    assert_int_equal(gw_events_dropped() - total0, 5000 - 4095);
    x = gw_event_take();
    assert_non_null(x);
    assert_int_equal(x->name, GW_EV_UPSTREAM_PAUSED);
    gw_free(x);
    x = gw_event_take();
    assert_non_null(x);
    assert_int_equal(x->name, GW_EV_UPSTREAM_RESUMED);
    gw_free(x);
    for (n = 0; (x = gw_event_take()) != NULL; n++) {
        assert_int_equal(x->name, GW_EV_REQUEST_FINISHED);
        gw_free(x);
    }
    assert_int_equal(n, 4095);
}

static void
test_events_push_out_of_memory_is_counted(void **state)
{
    uint64_t before;

    (void)state;
    gw_events_init();
    before = gw_events_dropped_of(GW_EV_KEY_LIMIT_ALERT);
    gw_alloc_fail_at(1);
    gw_event_push(GW_EV_KEY_LIMIT_ALERT, "{\"n\":1}");
    gw_alloc_fail_at(0);
    assert_int_equal(gw_events_dropped_of(GW_EV_KEY_LIMIT_ALERT) - before, 1);
    assert_null(gw_event_take());
}

static void
test_events_names_round_trip(void **state)
{
    enum gw_event_name e;
    unsigned i;

    (void)state;
    for (i = 0; i < GW_EV__COUNT; i++) {
        const char *s = gw_event_str((enum gw_event_name)i);

        assert_true(gw_event_from_str(s, strlen(s), &e));
        assert_int_equal(e, i);
    }
    assert_false(gw_event_from_str("request", 7, &e));
    assert_false(gw_event_from_str("", 0, &e));
    assert_string_equal(gw_event_str(GW_EV__COUNT), "unknown");
}

/* ---- filters ---- */

static struct gw_event *
ev_new(enum gw_event_name name, const char *client, const char *id)
{
    static union {
        struct gw_event ev;
        char bytes[sizeof(struct gw_event) + 8];
    } u;

    memset(&u, 0, sizeof(u));
    u.ev.name = name;
    snprintf(u.ev.client, sizeof(u.ev.client), "%s", client);
    snprintf(u.ev.id, sizeof(u.ev.id), "%s", id);
    return &u.ev;
}

static void
test_events_filter_types_and_bad_names(void **state)
{
    struct gw_event_filter f;
    const char *bad;
    size_t bad_len;

    (void)state;
    gw_event_filter_init(&f);
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_UPSTREAM_PAUSED, "", "")));
    assert_int_equal(
        gw_event_filter_set_types(&f, "request_finished,upstream_paused", &bad, &bad_len), GW_OK);
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_UPSTREAM_PAUSED, "", "")));
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "a", "x")));
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_UPSTREAM_RESUMED, "", "")));
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_KEY_LIMIT_ALERT, "a", "")));
    /* the stream's own drop notes always pass */
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_EVENTS_DROPPED, "", "")));

    assert_int_equal(gw_event_filter_set_types(&f, "upstream_paused,nope", &bad, &bad_len),
                     GW_E_BAD_REQUEST);
    assert_int_equal(bad_len, 4);
    assert_memory_equal(bad, "nope", 4);
    /* unchanged by the refusal */
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "a", "x")));
    assert_int_equal(gw_event_filter_set_types(&f, "", &bad, &bad_len), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_types(&f, "upstream_paused,", &bad, &bad_len),
                     GW_E_BAD_REQUEST);
}

static void
test_events_filter_client(void **state)
{
    struct gw_event_filter f;

    (void)state;
    gw_event_filter_init(&f);
    assert_int_equal(gw_event_filter_set_client(&f, "alice"), GW_OK);
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "alice", "x")));
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "bob", "x")));
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "alicex", "x")));
    /* a request refused before its key was known is nobody's */
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "", "x")));
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_KEY_LIMIT_ALERT, "alice", "")));
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_KEY_LIMIT_ALERT, "bob", "")));
    /* upstream events are everyone's */
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_UPSTREAM_PAUSED, "", "")));
    assert_int_equal(gw_event_filter_set_client(&f, ""), GW_E_BAD_REQUEST);
}

static void
test_events_filter_sample_values(void **state)
{
    struct gw_event_filter f;

    (void)state;
    gw_event_filter_init(&f);
    assert_int_equal(gw_event_filter_set_sample(&f, "0.25"), GW_OK);
    assert_true(f.sample == 0.25);
    assert_int_equal(gw_event_filter_set_sample(&f, "1"), GW_OK);
    assert_int_equal(gw_event_filter_set_sample(&f, "0"), GW_OK);
    assert_int_equal(gw_event_filter_set_sample(&f, "1.5"), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_sample(&f, "-0.1"), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_sample(&f, "nan"), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_sample(&f, ""), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_sample(&f, "0x1"), GW_E_BAD_REQUEST);
    assert_int_equal(gw_event_filter_set_sample(&f, "0..1"), GW_E_BAD_REQUEST);
    assert_true(f.sample == 0); /* the last good value */
    /* sample 0 leaves out every request_finished, and only those */
    assert_false(gw_event_filter_pass(&f, ev_new(GW_EV_REQUEST_FINISHED, "a", "abc")));
    assert_true(gw_event_filter_pass(&f, ev_new(GW_EV_UPSTREAM_PAUSED, "", "")));
}

static void
test_events_sampling_is_deterministic_per_id_and_near_its_rate(void **state)
{
    char id[40];
    unsigned i, kept = 0, kept_again = 0, nested_ok = 1;

    (void)state;
    for (i = 0; i < 10000; i++) {
        bool at10, at30;

        snprintf(id, sizeof(id), "%032x", i * 2654435761u);
        assert_true(gw_event_sampled(id, 1.0));
        assert_false(gw_event_sampled(id, 0.0));
        at10 = gw_event_sampled(id, 0.1);
        at30 = gw_event_sampled(id, 0.3);
        kept += at10;
        kept_again += gw_event_sampled(id, 0.1);
        if (at10 && !at30)
            nested_ok = 0; /* a smaller rate keeps a subset of a larger one */
    }
    assert_int_equal(kept, kept_again);
    assert_true(kept > 800 && kept < 1200);
    assert_true(nested_ok);
}

static void
test_events_interest_follows_the_subscribers(void **state)
{
    (void)state;
    gw_events_init();
    assert_false(gw_event_wanted(GW_EV_REQUEST_FINISHED));
    assert_false(gw_event_wanted_request("abc"));
    gw_events_set_interest(GW_EVENT_MASK(GW_EV_UPSTREAM_PAUSED), 1.0);
    assert_true(gw_event_wanted(GW_EV_UPSTREAM_PAUSED));
    assert_false(gw_event_wanted_request("abc"));
    gw_events_set_interest(GW_EVENT_MASK(GW_EV_REQUEST_FINISHED), 1.0);
    assert_true(gw_event_wanted_request("abc"));
    gw_events_set_interest(GW_EVENT_MASK(GW_EV_REQUEST_FINISHED), 0.0);
    assert_false(gw_event_wanted_request("abc"));
    gw_events_set_interest(GW_EVENT_MASK(GW_EV_REQUEST_FINISHED), 0.5);
    assert_int_equal(gw_event_wanted_request("abc"), gw_event_sampled("abc", 0.5));
    gw_events_set_interest(0, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_come_out_in_order_with_their_names),
        cmocka_unit_test(test_events_full_ring_drops_and_counts_per_name),
        cmocka_unit_test(test_events_request_burst_cannot_crowd_out_rare_events),
        cmocka_unit_test(test_events_push_out_of_memory_is_counted),
        cmocka_unit_test(test_events_names_round_trip),
        cmocka_unit_test(test_events_filter_types_and_bad_names),
        cmocka_unit_test(test_events_filter_client),
        cmocka_unit_test(test_events_filter_sample_values),
        cmocka_unit_test(test_events_sampling_is_deterministic_per_id_and_near_its_rate),
        cmocka_unit_test(test_events_interest_follows_the_subscribers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
