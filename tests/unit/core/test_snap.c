/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_snap.c - snapshot publishing: readers keep what they acquired
 * across a publish; a retired snapshot is freed once unreferenced and its grace period
 * is over; readers on several threads under publishes (run under TSan by make tsan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ck_pr.h>
#include <pthread.h>

#include "core/alloc.h"
#include "core/snap.h"

/* Bare configs: gw_conf_free copes with empty arrays. */
static struct gw_conf *
conf_new(unsigned workers)
{
    struct gw_conf *c = gw_calloc(1, sizeof(*c));

    assert_non_null(c); /* may fail under `make test-oom` */
    c->server.workers = workers;
    return c;
}

static void
test_snap_reader_keeps_old_config_across_publish(void **state)
{
    struct gw_thread main_t, reader;
    struct gw_conf *held;

    (void)state;
    gw_snap_init();
    gw_thread_register(&main_t);
    gw_thread_register(&reader);
    gw_conf_publish(&main_t, conf_new(1));
    held = gw_conf_acquire(&reader);
    assert_int_equal(held->server.workers, 1);
    gw_conf_publish(&main_t, conf_new(2));
    gw_snap_poll(&main_t);
    /* still readable: the reader holds a reference */
    assert_int_equal(held->server.workers, 1);
    assert_int_equal(held->generation, 1);
    {
        struct gw_conf *now = gw_conf_acquire(&reader);

        assert_int_equal(now->server.workers, 2);
        assert_int_equal(now->generation, 2);
        gw_conf_release(now);
    }
    gw_conf_release(held);
    gw_snap_shutdown(&main_t);
    gw_thread_unregister(&reader);
    gw_thread_unregister(&main_t);
}

static unsigned stop_readers;

static void *
reader_main(void *arg)
{
    struct gw_thread t;
    unsigned long n = 0;

    (void)arg;
    gw_thread_register(&t);
    while (!ck_pr_load_uint(&stop_readers)) {
        struct gw_conf *c = gw_conf_acquire(&t);

        if (c) {
            /* every published config has workers == generation */
            assert_int_equal(c->server.workers, (unsigned)c->generation);
            gw_conf_release(c);
        }
        n++;
    }
    gw_thread_unregister(&t);
    return (void *)n;
}

static void
test_snap_concurrent_readers_see_whole_configs(void **state)
{
    struct gw_thread main_t;
    pthread_t th[3];
    unsigned i;

    (void)state;
    gw_snap_init();
    gw_thread_register(&main_t);
    gw_conf_publish(&main_t, conf_new(1));
    ck_pr_store_uint(&stop_readers, 0);
    for (i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, reader_main, NULL);
    for (i = 2; i <= 2000; i++) {
        gw_conf_publish(&main_t, conf_new(i));
        gw_snap_poll(&main_t);
    }
    ck_pr_store_uint(&stop_readers, 1);
    for (i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    gw_snap_shutdown(&main_t);
    gw_thread_unregister(&main_t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snap_reader_keeps_old_config_across_publish),
        cmocka_unit_test(test_snap_concurrent_readers_see_whole_configs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
