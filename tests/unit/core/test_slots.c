/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_slots.c - admission semaphores: try/release, FIFO grants, fairness
 * against a later try, a group waiting on three semaphores (one grant, no leaked slot),
 * cancel before and after a grant, a free slot taken at add time, resize (grow, shrink,
 * remove the limit), the registry and its out-of-memory paths, and 4 threads hammering
 * one semaphore of 2 slots and three of 1 slot with random cancels (run under TSan by
 * hand: see the comment above test_slots_threads_one_semaphore_never_exceeds_max).
 * Threads: single-threaded except the two thread tests.
 * See: core/slots.c
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/slots.h"

/* ---- a grant recorder ---- */

#define T_MAX_GRANTS 32

struct t_grants {
    unsigned n;
    struct gw_slots_wait *g[T_MAX_GRANTS];
    unsigned index[T_MAX_GRANTS];
};

static void
t_record(void *ctx, struct gw_slots_wait *g, unsigned index)
{
    struct t_grants *r = ctx;

    assert_true(r->n < T_MAX_GRANTS);
    r->g[r->n] = g;
    r->index[r->n] = index;
    r->n++;
}

static void
t_expect_stats(struct gw_slots *s, unsigned max, unsigned in_use, unsigned waiting)
{
    unsigned m = 99, u = 99, w = 99;

    gw_slots_stats(s, &m, &u, &w);
    assert_int_equal(m, max);
    assert_int_equal(u, in_use);
    assert_int_equal(w, waiting);
}

/* A registry with one semaphore "p" of <max> slots. */
static struct gw_slots *
t_slots(struct gw_slots_reg **regp, const char *name, unsigned max)
{
    struct gw_slots *s;

    if (!*regp)
        *regp = gw_slots_reg_new();
    assert_non_null(*regp);
    s = gw_slots_reg_get(*regp, name);
    assert_non_null(s);
    gw_slots_resize(s, max, NULL, NULL);
    return s;
}

/* ---- basics ---- */

static void
test_slots_try_takes_up_to_max_and_release_frees(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 2);
    struct t_grants gr = {0};

    (void)state;
    t_expect_stats(s, 2, 0, 0);
    assert_true(gw_slots_try(s));
    assert_true(gw_slots_try(s));
    assert_false(gw_slots_try(s));
    t_expect_stats(s, 2, 2, 0);
    gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 2, 1, 0);
    assert_true(gw_slots_try(s));
    assert_false(gw_slots_try(s));
    gw_slots_release(s, t_record, &gr);
    gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 2, 0, 0);
    assert_int_equal(gr.n, 0); /* nobody waited: no grant */
    gw_slots_reg_free(reg);
}

static void
test_slots_max_zero_means_unlimited(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 0);
    struct gw_slots_wait g;
    unsigned i, idx = 99;

    (void)state;
    for (i = 0; i < 1000; i++)
        assert_true(gw_slots_try(s));
    t_expect_stats(s, 0, 1000, 0);
    /* A wait on an unlimited semaphore wins at once. */
    gw_slots_wait_init(&g, NULL, 0);
    assert_true(gw_slots_wait_add(&g, s, 3));
    assert_true(gw_slots_wait_cancel(&g, &idx));
    assert_int_equal(idx, 3);
    t_expect_stats(s, 0, 1001, 0);
    for (i = 0; i < 1001; i++)
        gw_slots_release(s, NULL, NULL);
    t_expect_stats(s, 0, 0, 0);
    gw_slots_reg_free(reg);
}

/* ---- FIFO and fairness ---- */

static void
test_slots_grants_waiters_in_fifo_order(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 1);
    struct gw_slots_wait g[3];
    struct t_grants gr = {0};
    unsigned i, idx;

    (void)state;
    assert_true(gw_slots_try(s));
    for (i = 0; i < 3; i++) {
        gw_slots_wait_init(&g[i], &g[i], i);
        assert_false(gw_slots_wait_add(&g[i], s, 0));
    }
    t_expect_stats(s, 1, 1, 3);
    for (i = 0; i < 3; i++) {
        gw_slots_release(s, t_record, &gr);
        assert_int_equal(gr.n, i + 1);
        assert_ptr_equal(gr.g[i], &g[i]); /* first come, first granted */
        assert_ptr_equal(gr.g[i]->owner, &g[i]);
        assert_int_equal(gr.g[i]->worker, i);
        assert_int_equal(gr.index[i], 0);
        t_expect_stats(s, 1, 1, 2 - i); /* the slot passed on: in_use unchanged */
        assert_true(gw_slots_wait_cancel(&g[i], &idx));
        assert_int_equal(idx, 0);
    }
    gw_slots_release(s, t_record, &gr);
    assert_int_equal(gr.n, 3);
    t_expect_stats(s, 1, 0, 0);
    gw_slots_reg_free(reg);
}

static void
test_slots_released_slot_goes_to_waiter_not_to_later_try(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 2);
    struct gw_slots_wait g;
    struct t_grants gr = {0};

    (void)state;
    assert_true(gw_slots_try(s));
    assert_true(gw_slots_try(s));
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, s, 0));
    gw_slots_release(s, t_record, &gr);
    assert_int_equal(gr.n, 1);
    assert_false(gw_slots_try(s)); /* the freed slot is the waiter's */
    t_expect_stats(s, 2, 2, 0);
    assert_true(gw_slots_wait_cancel(&g, NULL));
    gw_slots_release(s, t_record, &gr);
    assert_true(gw_slots_try(s)); /* now free for anyone */
    gw_slots_release(s, t_record, &gr);
    gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 2, 0, 0);
    assert_int_equal(gr.n, 1);
    gw_slots_reg_free(reg);
}

/* ---- groups ---- */

static void
test_slots_group_on_three_gets_one_grant_and_leaks_nothing(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s[3];
    struct gw_slots_wait g, h;
    struct t_grants gr = {0};
    unsigned i, idx = 99;

    (void)state;
    s[0] = t_slots(&reg, "a", 1);
    s[1] = t_slots(&reg, "b", 1);
    s[2] = t_slots(&reg, "c", 1);
    for (i = 0; i < 3; i++)
        assert_true(gw_slots_try(s[i]));
    gw_slots_wait_init(&g, &g, 1);
    for (i = 0; i < 3; i++)
        assert_false(gw_slots_wait_add(&g, s[i], i));
    /* A second request waits on "c" only, behind g. */
    gw_slots_wait_init(&h, &h, 2);
    assert_false(gw_slots_wait_add(&h, s[2], 7));

    gw_slots_release(s[1], t_record, &gr); /* candidate 1 frees first */
    assert_int_equal(gr.n, 1);
    assert_ptr_equal(gr.g[0], &g);
    assert_int_equal(gr.index[0], 1);
    t_expect_stats(s[1], 1, 1, 0);

    /* "a" frees before g's owner has cleaned up: g's stale waiter is skipped and the
     * slot goes back to free. */
    gw_slots_release(s[0], t_record, &gr);
    assert_int_equal(gr.n, 1);
    t_expect_stats(s[0], 1, 0, 0);
    assert_true(gw_slots_try(s[0]));

    /* "c" frees: g's stale waiter is skipped, h (next in line) gets it. */
    gw_slots_release(s[2], t_record, &gr);
    assert_int_equal(gr.n, 2);
    assert_ptr_equal(gr.g[1], &h);
    assert_int_equal(gr.index[1], 7);
    t_expect_stats(s[2], 1, 1, 0);

    assert_true(gw_slots_wait_cancel(&g, &idx));
    assert_int_equal(idx, 1);
    assert_true(gw_slots_wait_cancel(&h, &idx));
    assert_int_equal(idx, 7);
    for (i = 0; i < 3; i++) {
        gw_slots_release(s[i], t_record, &gr);
        t_expect_stats(s[i], 1, 0, 0);
    }
    assert_int_equal(gr.n, 2);
    gw_slots_reg_free(reg);
}

static void
test_slots_group_cleanup_removes_stale_waiters(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *a = t_slots(&reg, "a", 1), *b = t_slots(&reg, "b", 1);
    struct gw_slots_wait g;
    struct t_grants gr = {0};

    (void)state;
    assert_true(gw_slots_try(a));
    assert_true(gw_slots_try(b));
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, a, 0));
    assert_false(gw_slots_wait_add(&g, b, 1));
    gw_slots_release(a, t_record, &gr);
    assert_int_equal(gr.n, 1);
    t_expect_stats(b, 1, 1, 1); /* stale until the owner ends the group */
    assert_true(gw_slots_wait_cancel(&g, NULL));
    t_expect_stats(b, 1, 1, 0);
    gw_slots_release(a, t_record, &gr);
    gw_slots_release(b, t_record, &gr);
    t_expect_stats(a, 1, 0, 0);
    t_expect_stats(b, 1, 0, 0);
    assert_int_equal(gr.n, 1);
    gw_slots_reg_free(reg);
}

static void
test_slots_cancel_before_grant_returns_false_and_leaves_no_waiter(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *a = t_slots(&reg, "a", 1), *b = t_slots(&reg, "b", 1);
    struct gw_slots_wait g;
    struct t_grants gr = {0};
    unsigned idx = 99;

    (void)state;
    assert_true(gw_slots_try(a));
    assert_true(gw_slots_try(b));
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, a, 0));
    assert_false(gw_slots_wait_add(&g, b, 1));
    t_expect_stats(a, 1, 1, 1);
    assert_false(gw_slots_wait_cancel(&g, &idx));
    assert_int_equal(idx, 99); /* untouched */
    t_expect_stats(a, 1, 1, 0);
    t_expect_stats(b, 1, 1, 0);
    gw_slots_release(a, t_record, &gr);
    gw_slots_release(b, t_record, &gr);
    assert_int_equal(gr.n, 0);
    t_expect_stats(a, 1, 0, 0);
    t_expect_stats(b, 1, 0, 0);
    gw_slots_reg_free(reg);
}

static void
test_slots_cancel_after_grant_returns_true_and_caller_owns_slot(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 1);
    struct gw_slots_wait g, h;
    struct t_grants gr = {0};
    unsigned idx = 99;

    (void)state;
    assert_true(gw_slots_try(s));
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, s, 4));
    gw_slots_release(s, t_record, &gr); /* granted: g now owns the slot */
    assert_int_equal(gr.n, 1);
    /* The deadline fires before the grant message is handled. */
    assert_true(gw_slots_wait_cancel(&g, &idx));
    assert_int_equal(idx, 4);
    t_expect_stats(s, 1, 1, 0);
    /* The caller gives it back; it goes to the next waiter as usual. */
    gw_slots_wait_init(&h, NULL, 0);
    assert_false(gw_slots_wait_add(&h, s, 0));
    gw_slots_release(s, t_record, &gr);
    assert_int_equal(gr.n, 2);
    assert_ptr_equal(gr.g[1], &h);
    assert_true(gw_slots_wait_cancel(&h, NULL));
    gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 1, 0, 0);
    gw_slots_reg_free(reg);
}

static void
test_slots_add_takes_a_free_slot_at_once(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *a = t_slots(&reg, "a", 1), *b = t_slots(&reg, "b", 1);
    struct gw_slots_wait g;
    struct t_grants gr = {0};
    unsigned idx = 99;

    (void)state;
    assert_true(gw_slots_try(a));
    /* b is free (its try would have lost a race with a release): add takes it. */
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, a, 0));
    assert_true(gw_slots_wait_add(&g, b, 1));
    t_expect_stats(b, 1, 1, 0);
    /* Once won, a further add neither queues nor takes. */
    gw_slots_release(a, t_record, &gr);
    assert_int_equal(gr.n, 0); /* g's waiter on a was stale: no grant */
    t_expect_stats(a, 1, 0, 0);
    assert_false(gw_slots_wait_add(&g, a, 2));
    t_expect_stats(a, 1, 0, 0);
    assert_true(gw_slots_wait_cancel(&g, &idx));
    assert_int_equal(idx, 1);
    gw_slots_release(b, t_record, &gr);
    t_expect_stats(b, 1, 0, 0);
    assert_int_equal(gr.n, 0);
    gw_slots_reg_free(reg);
}

/* ---- resize ---- */

static void
test_slots_resize_grow_grants_waiters(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 1);
    struct gw_slots_wait g[3];
    struct t_grants gr = {0};
    unsigned i;

    (void)state;
    assert_true(gw_slots_try(s));
    for (i = 0; i < 3; i++) {
        gw_slots_wait_init(&g[i], NULL, 0);
        assert_false(gw_slots_wait_add(&g[i], s, i));
    }
    gw_slots_resize(s, 3, t_record, &gr); /* two more slots: the first two waiters */
    assert_int_equal(gr.n, 2);
    assert_ptr_equal(gr.g[0], &g[0]);
    assert_ptr_equal(gr.g[1], &g[1]);
    t_expect_stats(s, 3, 3, 1);
    assert_true(gw_slots_wait_cancel(&g[0], NULL));
    assert_true(gw_slots_wait_cancel(&g[1], NULL));
    assert_false(gw_slots_wait_cancel(&g[2], NULL));
    for (i = 0; i < 3; i++)
        gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 3, 0, 0);
    assert_int_equal(gr.n, 2);
    gw_slots_reg_free(reg);
}

static void
test_slots_resize_shrink_lets_in_use_drain_first(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 3);
    struct gw_slots_wait g;
    struct t_grants gr = {0};

    (void)state;
    assert_true(gw_slots_try(s));
    assert_true(gw_slots_try(s));
    assert_true(gw_slots_try(s));
    gw_slots_resize(s, 1, t_record, &gr);
    t_expect_stats(s, 1, 3, 0); /* nothing taken back */
    assert_false(gw_slots_try(s));
    gw_slots_wait_init(&g, NULL, 0);
    assert_false(gw_slots_wait_add(&g, s, 0));
    gw_slots_release(s, t_record, &gr); /* 2 held, limit 1: no grant */
    assert_int_equal(gr.n, 0);
    t_expect_stats(s, 1, 2, 1);
    gw_slots_release(s, t_record, &gr); /* 1 held: still at the limit */
    assert_int_equal(gr.n, 0);
    t_expect_stats(s, 1, 1, 1);
    gw_slots_release(s, t_record, &gr); /* below the limit: the waiter gets it */
    assert_int_equal(gr.n, 1);
    t_expect_stats(s, 1, 1, 0);
    assert_true(gw_slots_wait_cancel(&g, NULL));
    gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 1, 0, 0);
    gw_slots_reg_free(reg);
}

static void
test_slots_resize_to_zero_grants_every_waiter(void **state)
{
    struct gw_slots_reg *reg = NULL;
    struct gw_slots *s = t_slots(&reg, "p", 1);
    struct gw_slots_wait g[5];
    struct t_grants gr = {0};
    unsigned i;

    (void)state;
    assert_true(gw_slots_try(s));
    for (i = 0; i < 5; i++) {
        gw_slots_wait_init(&g[i], NULL, 0);
        assert_false(gw_slots_wait_add(&g[i], s, 0));
    }
    gw_slots_resize(s, 0, t_record, &gr);
    assert_int_equal(gr.n, 5);
    for (i = 0; i < 5; i++) {
        assert_ptr_equal(gr.g[i], &g[i]);
        assert_true(gw_slots_wait_cancel(&g[i], NULL));
    }
    t_expect_stats(s, 0, 6, 0);
    assert_true(gw_slots_try(s));
    for (i = 0; i < 7; i++)
        gw_slots_release(s, t_record, &gr);
    t_expect_stats(s, 0, 0, 0);
    assert_int_equal(gr.n, 5);
    gw_slots_reg_free(reg);
}

/* ---- registry ---- */

static void
test_slots_registry_keeps_one_object_per_name(void **state)
{
    struct gw_slots_reg *reg = gw_slots_reg_new();
    struct gw_slots *a, *b, *again;
    char name[16];
    unsigned i;

    (void)state;
    assert_non_null(reg);
    a = gw_slots_reg_get(reg, "alpha");
    b = gw_slots_reg_get(reg, "beta");
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    t_expect_stats(a, 0, 0, 0); /* created without a limit */
    gw_slots_resize(a, 2, NULL, NULL);
    assert_true(gw_slots_try(a));
    /* A reload looks the name up again: same object, in-flight count kept. */
    for (i = 0; i < 20; i++) { /* grow the registry past its first array */
        snprintf(name, sizeof(name), "p%u", i);
        assert_non_null(gw_slots_reg_get(reg, name));
    }
    again = gw_slots_reg_get(reg, "alpha");
    assert_ptr_equal(again, a);
    t_expect_stats(again, 2, 1, 0);
    gw_slots_release(a, NULL, NULL);
    gw_slots_reg_free(reg);
    gw_slots_reg_free(NULL);
}

static void
test_slots_registry_out_of_memory_returns_null(void **state)
{
    struct gw_slots_reg *reg;
    unsigned n;

    (void)state;
    gw_alloc_fail_at(1);
    assert_null(gw_slots_reg_new());
    /* A first entry allocates three times (array, object, name): fail each in turn. */
    for (n = 1; n <= 3; n++) {
        reg = gw_slots_reg_new();
        assert_non_null(reg);
        gw_alloc_fail_at(n);
        assert_null(gw_slots_reg_get(reg, "x"));
        gw_alloc_fail_at(0);
        assert_non_null(gw_slots_reg_get(reg, "x"));
        gw_slots_reg_free(reg);
    }
}

/* ---- threads ---- */

#define T_THREADS 4
#define T_SEMS 3

struct t_shared {
    struct gw_slots *s[T_SEMS];
    unsigned nsems;
    unsigned max;            /* per semaphore */
    int holders[T_SEMS];     /* atomic: threads holding a slot right now */
    int max_holders[T_SEMS]; /* atomic: the most ever seen */
    unsigned long iters;
};

struct t_thread {
    struct t_shared *sh;
    pthread_t th;
    uint64_t rng;
    int granted; /* atomic: set by t_wake, the grant fn */
    struct gw_slots_wait g;
    unsigned long held, waited, gave_up, won_late;
    unsigned long bad; /* broken promises, checked by the main thread (no cmocka
                        * assertion off the main thread: they longjmp) */
};

static uint64_t
t_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The grant fn of the thread tests: wakes the waiting thread through its flag. */
static void
t_wake(void *ctx, struct gw_slots_wait *g, unsigned index)
{
    struct t_thread *t = g->owner;

    (void)ctx;
    (void)index;
    sched_yield(); /* widen the window in which a racing cancel must wait for us */
    /* RELEASE: pairs with the waiting thread's ACQUIRE load of the flag. */
    __atomic_store_n(&t->granted, 1, __ATOMIC_RELEASE);
}

static void
t_hold(struct t_thread *t, unsigned k)
{
    struct t_shared *sh = t->sh;
    int now, seen;

    now = __atomic_add_fetch(&sh->holders[k], 1, __ATOMIC_SEQ_CST);
    seen = __atomic_load_n(&sh->max_holders[k], __ATOMIC_RELAXED);
    while (now > seen && !__atomic_compare_exchange_n(&sh->max_holders[k], &seen, now, false,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    t->held++;
    sched_yield(); /* hold a little longer, so that other threads find the slots full */
    __atomic_sub_fetch(&sh->holders[k], 1, __ATOMIC_SEQ_CST);
    gw_slots_release(sh->s[k], t_wake, NULL);
}

static void *
t_run(void *arg)
{
    struct t_thread *t = arg;
    struct t_shared *sh = t->sh;
    unsigned long it;
    unsigned k, idx;

    for (it = 0; it < sh->iters; it++) {
        bool took = false, now = false;

        for (k = 0; k < sh->nsems && !took; k++)
            took = gw_slots_try(sh->s[k]);
        if (took) {
            t_hold(t, k - 1);
            continue;
        }
        t->waited++;
        __atomic_store_n(&t->granted, 0, __ATOMIC_RELAXED);
        gw_slots_wait_init(&t->g, t, 0);
        for (k = 0; k < sh->nsems && !now; k++)
            now = gw_slots_wait_add(&t->g, sh->s[k], k);
        if (!now && t_rand(&t->rng) % 8 == 0) {
            /* Give up at a random moment: may race with a grant on another thread. */
            for (k = t_rand(&t->rng) % 4; k > 0; k--)
                sched_yield();
            if (gw_slots_wait_cancel(&t->g, &idx)) {
                /* The grant won: its fn has run, and the slot is ours. */
                if (__atomic_load_n(&t->granted, __ATOMIC_ACQUIRE) != 1)
                    t->bad++;
                t->won_late++;
                t_hold(t, idx);
            } else {
                t->gave_up++;
            }
            continue;
        }
        if (!now) {
            /* ACQUIRE: pairs with t_wake's RELEASE store. */
            while (!__atomic_load_n(&t->granted, __ATOMIC_ACQUIRE))
                sched_yield();
        }
        idx = 99;
        if (!gw_slots_wait_cancel(&t->g, &idx) || idx >= sh->nsems) {
            t->bad++;
            break;
        }
        t_hold(t, idx);
    }
    return NULL;
}

static void
t_hammer(unsigned nsems, unsigned max, unsigned long iters)
{
    struct gw_slots_reg *reg = NULL;
    struct t_shared sh;
    struct t_thread t[T_THREADS];
    unsigned i, k;
    unsigned long waited = 0, gave_up = 0, won_late = 0;
    char name[16];

    memset(&sh, 0, sizeof(sh));
    memset(t, 0, sizeof(t));
    sh.nsems = nsems;
    sh.max = max;
    sh.iters = iters;
    for (k = 0; k < nsems; k++) {
        snprintf(name, sizeof(name), "s%u", k);
        sh.s[k] = t_slots(&reg, name, max);
    }
    for (i = 0; i < T_THREADS; i++) {
        t[i].sh = &sh;
        t[i].rng = 0x9e3779b97f4a7c15ULL * (i + 1);
        assert_int_equal(pthread_create(&t[i].th, NULL, t_run, &t[i]), 0);
    }
    for (i = 0; i < T_THREADS; i++) {
        assert_int_equal(pthread_join(t[i].th, NULL), 0);
        assert_int_equal(t[i].bad, 0);
        assert_int_equal(t[i].held + t[i].gave_up, iters);
        waited += t[i].waited;
        gave_up += t[i].gave_up;
        won_late += t[i].won_late;
    }
    for (k = 0; k < nsems; k++) {
        t_expect_stats(sh.s[k], max, 0, 0);
        if (k == 0)
            assert_true(sh.max_holders[k] >= 1);
        assert_true(sh.max_holders[k] <= (int)max);
    }
    printf("# %u semaphore(s) of %u: %lu waits, %lu gave up, %lu won while giving up\n", nsems, max,
           waited, gave_up, won_late);
    gw_slots_reg_free(reg);
}

/* 4 threads, 50000 rounds each: try, else wait (1 in 8 waits gives up at once, racing
 * with grants), hold, release; at most 2 holders at any time, nothing left at the end.
 * For the race detector, build by hand with -fsanitize=thread -DCK_USE_CC_BUILTINS=1
 * and run with TSAN_OPTIONS=suppressions=tests/tsan.supp: no reports expected. */
static void
test_slots_threads_one_semaphore_never_exceeds_max(void **state)
{
    (void)state;
    t_hammer(1, 2, 50000);
}

/* The same with groups: every wait is on three semaphores of 1 slot each. */
static void
test_slots_threads_groups_on_three_never_exceed_max(void **state)
{
    (void)state;
    t_hammer(3, 1, 50000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_try_takes_up_to_max_and_release_frees),
        cmocka_unit_test(test_slots_max_zero_means_unlimited),
        cmocka_unit_test(test_slots_grants_waiters_in_fifo_order),
        cmocka_unit_test(test_slots_released_slot_goes_to_waiter_not_to_later_try),
        cmocka_unit_test(test_slots_group_on_three_gets_one_grant_and_leaks_nothing),
        cmocka_unit_test(test_slots_group_cleanup_removes_stale_waiters),
        cmocka_unit_test(test_slots_cancel_before_grant_returns_false_and_leaves_no_waiter),
        cmocka_unit_test(test_slots_cancel_after_grant_returns_true_and_caller_owns_slot),
        cmocka_unit_test(test_slots_add_takes_a_free_slot_at_once),
        cmocka_unit_test(test_slots_resize_grow_grants_waiters),
        cmocka_unit_test(test_slots_resize_shrink_lets_in_use_drain_first),
        cmocka_unit_test(test_slots_resize_to_zero_grants_every_waiter),
        cmocka_unit_test(test_slots_registry_keeps_one_object_per_name),
        cmocka_unit_test(test_slots_registry_out_of_memory_returns_null),
        cmocka_unit_test(test_slots_threads_one_semaphore_never_exceeds_max),
        cmocka_unit_test(test_slots_threads_groups_on_three_never_exceed_max),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
