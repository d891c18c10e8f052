/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_clock.c - the clocks of net/logger.h: read each time on a thread
 * that never called net_clock_turn; on one that did, read once per turn and standing
 * still until the next turn. The tests wait for the system clock to move (a busy
 * loop on clock_gettime) instead of sleeping for it.
 * See: net/logger.c
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "net/logger.h"

static uint64_t
sys_us(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Returns once both system clocks are past <mono_us> and <now_ms> by at least <gap_us>. */
static void
wait_past(uint64_t mono_us, uint64_t now_ms, uint64_t gap_us)
{
    while (sys_us(CLOCK_MONOTONIC) < mono_us + gap_us ||
           sys_us(CLOCK_REALTIME) < (now_ms * 1000) + gap_us)
        ;
}

static void *
reads_move(void *arg)
{
    uint64_t m0 = net_mono_us(), w0 = net_now_ms();

    (void)arg;
    wait_past(m0, w0, 3000);
    return (net_mono_us() >= m0 + 3000 && net_now_ms() >= w0 + 2) ? (void *)1 : NULL;
}

/* Runs first: this process's main thread has not called net_clock_turn yet. */
static void
test_clock_moves_on_a_thread_without_turns(void **state)
{
    (void)state;
    assert_non_null(reads_move(NULL));
}

static void
test_clock_stands_still_within_a_turn_and_moves_at_the_next(void **state)
{
    uint64_t m0, w0;

    (void)state;
    net_clock_turn();
    m0 = net_mono_us();
    w0 = net_now_ms();
    assert_true(m0 > 0 && w0 > 0);
    wait_past(m0, w0, 3000);
    assert_int_equal(net_mono_us(), m0);
    assert_int_equal(net_now_ms(), w0);

    net_clock_turn();
    assert_true(net_mono_us() >= m0 + 3000);
    assert_true(net_now_ms() >= w0 + 2);
}

/* Each clock is read when the turn first asks for it, not when the turn begins. */
static void
test_clock_is_read_at_its_first_use_in_a_turn(void **state)
{
    uint64_t m0, w0;

    (void)state;
    m0 = sys_us(CLOCK_MONOTONIC);
    w0 = sys_us(CLOCK_REALTIME) / 1000;
    net_clock_turn();
    wait_past(m0, w0, 3000);
    assert_true(net_mono_us() >= m0 + 3000);
    assert_true(net_now_ms() >= w0 + 2);
}

/* The turns of one thread leave the others' clocks alone. */
static void
test_clock_turns_are_per_thread(void **state)
{
    pthread_t t;
    void *moved = NULL;

    (void)state;
    net_clock_turn();
    (void)net_mono_us();
    (void)net_now_ms();
    assert_int_equal(pthread_create(&t, NULL, reads_move, NULL), 0);
    assert_int_equal(pthread_join(t, &moved), 0);
    assert_non_null(moved);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_moves_on_a_thread_without_turns),
        cmocka_unit_test(test_clock_stands_still_within_a_turn_and_moves_at_the_next),
        cmocka_unit_test(test_clock_is_read_at_its_first_use_in_a_turn),
        cmocka_unit_test(test_clock_turns_are_per_thread),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
