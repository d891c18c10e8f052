/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_reload.c - the reload queue between an asking loop and main's:
 * asks queued before main attaches are served then, in order, one run each, each
 * answered with its own outcome on the asker's loop; the cap on waiting asks; close
 * answers what is queued with gw.shutting_down and refuses later asks; an ask from
 * another thread is answered on that thread; the outcome's JSON and its event.
 * Owns:    nothing beyond each test.
 * Threads: main and, in one test, an asking thread.
 * See:     net/reload.h
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <jansson.h>

#include "core/alloc.h"
#include "core/events.h"
#include "net/reload.h"

/* ---- a fake main: each run is one more generation ---- */

struct runs {
    unsigned n;
    uint64_t gen;
    const char *sources[8];
};

static void
fake_run(void *arg, const char *source, struct net_reload_result *res)
{
    struct runs *r = arg;

    if (r->n < 8)
        r->sources[r->n] = source;
    r->n++;
    res->reloaded = true;
    res->generation = ++r->gen;
}

/* What one asker got. */
struct answer {
    unsigned calls;
    uint64_t gen;
    bool reloaded;
    enum gw_code code;
    pthread_t thread;
};

static void
on_done(void *arg, const struct net_reload_result *res)
{
    struct answer *a = arg;

    a->calls++;
    a->gen = res->generation;
    a->reloaded = res->reloaded;
    a->code = res->code;
    a->thread = pthread_self();
}

static void
on_nothing(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static int
setup(void **state)
{
    (void)state;
    evthread_use_pthreads();
    return 0;
}

/* ---- tests ---- */

static void
test_reload_asks_run_in_order_each_with_its_own_answer(void **state)
{
    struct event_base *mainb = event_base_new(), *asker = event_base_new();
    struct runs runs = {0};
    struct net_reload *r = net_reload_new(fake_run, &runs);
    struct answer a[3] = {{0}};
    static const char *const src[3] = {"control", "save", "control"};
    unsigned i;

    (void)state;
    assert_non_null(r);
    for (i = 0; i < 3; i++)
        assert_int_equal(net_reload_ask(r, asker, src[i], on_done, &a[i]), GW_OK);
    event_base_loop(mainb, EVLOOP_NONBLOCK); /* not attached yet: nothing runs */
    assert_int_equal(runs.n, 0);

    assert_int_equal(net_reload_attach(r, mainb), GW_OK);
    event_base_loop(mainb, EVLOOP_NONBLOCK);
    assert_int_equal(runs.n, 3);
    for (i = 0; i < 3; i++)
        assert_string_equal(runs.sources[i], src[i]);
    assert_int_equal(a[0].calls, 0); /* answered on the asker's loop only */

    event_base_loop(asker, EVLOOP_NONBLOCK);
    for (i = 0; i < 3; i++) {
        assert_int_equal(a[i].calls, 1);
        assert_true(a[i].reloaded);
        assert_int_equal(a[i].gen, i + 1);
    }
    /* a later ask is served at once, on its own */
    assert_int_equal(net_reload_ask(r, asker, "control", on_done, &a[0]), GW_OK);
    event_base_loop(mainb, EVLOOP_NONBLOCK);
    event_base_loop(asker, EVLOOP_NONBLOCK);
    assert_int_equal(a[0].calls, 2);
    assert_int_equal(a[0].gen, 4);

    net_reload_close(r);
    net_reload_free(r);
    event_base_free(mainb);
    event_base_free(asker);
}

static void
test_reload_waiting_asks_are_capped_and_close_answers_them(void **state)
{
    struct event_base *asker = event_base_new();
    struct runs runs = {0};
    struct net_reload *r = net_reload_new(fake_run, &runs);
    struct answer *a = calloc(NET_RELOAD_MAX_PENDING + 1, sizeof(*a));
    unsigned i;

    (void)state;
    assert_non_null(r);
    assert_non_null(a);
    for (i = 0; i < NET_RELOAD_MAX_PENDING; i++)
        assert_int_equal(net_reload_ask(r, asker, "control", on_done, &a[i]), GW_OK);
    assert_int_equal(net_reload_ask(r, asker, "control", on_done, &a[i]), GW_E_BUSY);

    net_reload_close(r);
    assert_int_equal(net_reload_ask(r, asker, "control", on_done, &a[i]), GW_E_SHUTTING_DOWN);
    event_base_loop(asker, EVLOOP_NONBLOCK);
    for (i = 0; i < NET_RELOAD_MAX_PENDING; i++) {
        assert_int_equal(a[i].calls, 1);
        assert_false(a[i].reloaded);
        assert_int_equal(a[i].code, GW_E_SHUTTING_DOWN);
    }
    assert_int_equal(a[i].calls, 0); /* refused asks are never answered */
    assert_int_equal(runs.n, 0);

    net_reload_free(r);
    event_base_free(asker);
    free(a);
}

/* ---- an ask from another thread ---- */

struct asker_thread {
    struct net_reload *r;
    struct event_base *mainb;
    struct answer a;
    enum gw_code rc;
    int refused; /* __atomic: the ask was refused, main need not wait for it */
};

static void
on_done_stop(void *arg, const struct net_reload_result *res)
{
    struct asker_thread *t = arg;

    on_done(&t->a, res);
}

static void *
asker_main(void *arg)
{
    struct asker_thread *t = arg;
    struct event_base *b = event_base_new();
    struct event *keep = event_new(b, -1, EV_PERSIST, on_nothing, NULL);
    struct timeval long_tv = {60, 0};

    event_add(keep, &long_tv); /* keeps the loop blocking until the answer */
    t->rc = net_reload_ask(t->r, b, "control", on_done_stop, t);
    if (t->rc != GW_OK) {
        __atomic_store_n(&t->refused, 1, __ATOMIC_RELEASE);
        event_base_loopbreak(t->mainb);
    }
    while (t->rc == GW_OK && t->a.calls == 0)
        event_base_loop(b, EVLOOP_ONCE);
    event_free(keep);
    event_base_free(b);
    return NULL;
}

static void
test_reload_an_ask_from_another_thread_is_answered_there(void **state)
{
    struct event_base *mainb = event_base_new();
    struct event *keep = event_new(mainb, -1, EV_PERSIST, on_nothing, NULL);
    struct timeval long_tv = {60, 0};
    struct runs runs = {0};
    struct asker_thread t = {0};
    pthread_t th;

    (void)state;
    t.r = net_reload_new(fake_run, &runs);
    t.mainb = mainb;
    assert_non_null(t.r);
    assert_int_equal(net_reload_attach(t.r, mainb), GW_OK);
    event_add(keep, &long_tv);
    assert_int_equal(pthread_create(&th, NULL, asker_main, &t), 0);
    /* runs.n is written by fake_run, on this thread's loop */
    while (runs.n == 0 && !__atomic_load_n(&t.refused, __ATOMIC_ACQUIRE))
        event_base_loop(mainb, EVLOOP_ONCE);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.rc, GW_OK);
    assert_int_equal(t.a.calls, 1);
    assert_int_equal(t.a.gen, 1);
    assert_true(pthread_equal(t.a.thread, th));

    net_reload_close(t.r);
    net_reload_free(t.r);
    event_free(keep);
    event_base_free(mainb);
}

/* ---- the outcome as JSON and as an event ---- */

static void
test_reload_result_json_and_event(void **state)
{
    struct net_reload_result res;
    uint64_t ok0, refused0, ok, refused;
    struct gw_event *ev;
    json_t *j, *p;

    (void)state;
    gw_events_init();
    net_reload_counts(&ok0, &refused0);
    memset(&res, 0, sizeof(res));
    res.reloaded = true;
    res.generation = 7;
    res.diff.providers.added.v = gw_calloc(1, sizeof(char *));
    assert_non_null(res.diff.providers.added.v);
    res.diff.providers.added.v[0] = gw_strdup("spare");
    assert_non_null(res.diff.providers.added.v[0]);
    res.diff.providers.added.n = 1;
    res.diff.settings[0] = "failover";
    res.diff.n_settings = 1;
    j = net_reload_result_json(&res);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(j, "reloaded")));
    assert_int_equal(json_integer_value(json_object_get(j, "generation")), 7);
    p = json_object_get(json_object_get(j, "changed"), "providers");
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "added"), 0)), "spare");
    assert_int_equal(json_array_size(json_object_get(p, "removed")), 0);
    assert_int_equal(json_array_size(json_object_get(
                         json_object_get(json_object_get(j, "changed"), "clients"), "changed")),
                     0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "settings"), 0)),
                        "failover");
    json_decref(j);

    net_reload_announce(&res, "signal");
    ev = gw_event_take();
    assert_non_null(ev);
    assert_int_equal(ev->name, GW_EV_CONFIG_RELOADED);
    j = json_loads(ev->json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "config_reloaded");
    assert_string_equal(json_string_value(json_object_get(j, "source")), "signal");
    json_decref(j);
    gw_free(ev);
    net_reload_result_fini(&res);

    memset(&res, 0, sizeof(res));
    res.generation = 3;
    res.code = GW_E_CFG_BAD_DIALECT;
    snprintf(res.message, sizeof(res.message), "the config file was refused");
    res.problems.v = gw_calloc(1, sizeof(*res.problems.v));
    assert_non_null(res.problems.v);
    res.problems.n = 1;
    res.problems.v[0].code = GW_E_CFG_BAD_DIALECT;
    res.problems.v[0].path = gw_strdup("providers[0] (up).dialect");
    res.problems.v[0].value = gw_strdup("klingon");
    res.problems.v[0].msg = gw_strdup("unknown dialect");
    j = net_reload_result_json(&res);
    assert_false(json_is_true(json_object_get(j, "reloaded")));
    assert_int_equal(json_integer_value(json_object_get(j, "generation")), 3);
    p = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(p, "code")), "config.bad_dialect");
    p = json_array_get(json_object_get(p, "problems"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "path")), "providers[0] (up).dialect");
    assert_string_equal(json_string_value(json_object_get(p, "value")), "klingon");
    json_decref(j);
    net_reload_announce(&res, "control");
    ev = gw_event_take();
    assert_non_null(ev);
    assert_int_equal(ev->name, GW_EV_CONFIG_REFUSED);
    gw_free(ev);
    net_reload_counts(&ok, &refused);
    assert_int_equal(ok, ok0 + 1);
    assert_int_equal(refused, refused0 + 1);
    net_reload_result_fini(&res);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload_asks_run_in_order_each_with_its_own_answer),
        cmocka_unit_test(test_reload_waiting_asks_are_capped_and_close_answers_them),
        cmocka_unit_test(test_reload_an_ask_from_another_thread_is_answered_there),
        cmocka_unit_test(test_reload_result_json_and_event),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
