/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_arena.c - the request arena (core/arena.c): alignment and
 * disjoint allocations, large allocations in blocks of their own without losing the
 * current block's room, zeroed and overflow-checked calloc, string copies, the growing
 * arrays of gw_arena_push, cleanups run newest first and before the memory goes,
 * reuse after fini, and every allocation failure answered with NULL.
 * See: core/arena.c
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/arena.h"

#define T_ALIGN (alignof(max_align_t))

static bool
t_aligned(const void *p)
{
    return ((uintptr_t)p & (T_ALIGN - 1)) == 0;
}

static void
test_arena_alloc_is_aligned_disjoint_and_counted(void **state)
{
    static const size_t sizes[] = {1, 3, 8, 17, 0, 100, 1, 255, 31, 64};
    unsigned char *p[sizeof(sizes) / sizeof(sizes[0])];
    struct gw_arena a;
    size_t i, k, used = 0;

    (void)state;
    gw_arena_init(&a);
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        p[i] = gw_arena_alloc(&a, sizes[i]);
        assert_non_null(p[i]);
        assert_true(t_aligned(p[i]));
        memset(p[i], (int)i + 1, sizes[i] ? sizes[i] : 1); /* a zero-size one holds 1 */
        used += sizes[i] ? sizes[i] : 1;
    }
    assert_int_equal(a.used, used);
    /* nothing written later overlapped an earlier allocation */
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (k = 0; k < (sizes[i] ? sizes[i] : 1); k++)
            assert_int_equal(p[i][k], (unsigned char)(i + 1));
    gw_arena_fini(&a);
}

static void
test_arena_large_allocation_keeps_the_current_blocks_room(void **state)
{
    struct gw_arena a;
    unsigned char *small1, *large, *small2;

    (void)state;
    gw_arena_init(&a);
    small1 = gw_arena_alloc(&a, 16);
    large = gw_arena_alloc(&a, 100000);
    small2 = gw_arena_alloc(&a, 16);
    assert_non_null(small1);
    assert_non_null(large);
    assert_non_null(small2);
    assert_true(t_aligned(large));
    memset(large, 0xab, 100000);
    /* the small ones share the first block: the large one did not end it */
    assert_true(small2 > small1 && small2 - small1 < 4096);
    assert_true(large + 100000 <= small1 || large >= small2 + 16);
    assert_int_equal(a.used, 16 + 100000 + 16);
    /* a large allocation first: it becomes the head block, fully used */
    gw_arena_fini(&a);
    large = gw_arena_alloc(&a, 5000);
    small1 = gw_arena_alloc(&a, 8);
    assert_non_null(large);
    assert_non_null(small1);
    assert_true(small1 < large || small1 >= large + 5000);
    gw_arena_fini(&a);
}

static void
test_arena_many_blocks_hold_their_bytes(void **state)
{
    unsigned char *p[64];
    struct gw_arena a;
    size_t i, k;

    (void)state;
    gw_arena_init(&a);
    for (i = 0; i < 64; i++) {
        p[i] = gw_arena_alloc(&a, 1000); /* four to a block, then a new one */
        assert_non_null(p[i]);
        memset(p[i], (int)i, 1000);
    }
    for (i = 0; i < 64; i++)
        for (k = 0; k < 1000; k++)
            assert_int_equal(p[i][k], (unsigned char)i);
    gw_arena_fini(&a);
}

static void
test_arena_calloc_zeroes_and_checks_overflow(void **state)
{
    struct gw_arena a;
    unsigned char *p;
    size_t i;

    (void)state;
    gw_arena_init(&a);
    p = gw_arena_alloc(&a, 64);
    assert_non_null(p); /* may fail under `make test-oom` */
    memset(p, 0xff, 64);
    p = gw_arena_calloc(&a, 10, 7);
    assert_non_null(p);
    for (i = 0; i < 70; i++)
        assert_int_equal(p[i], 0);
    assert_null(gw_arena_calloc(&a, SIZE_MAX / 2, 3));
    assert_null(gw_arena_alloc(&a, SIZE_MAX));
    assert_null(gw_arena_alloc(&a, SIZE_MAX - 8));
    gw_arena_fini(&a);
}

static void
test_arena_str_copies_and_terminates(void **state)
{
    struct gw_arena a;
    char src[] = "hello\0world";
    struct gw_str s;

    (void)state;
    gw_arena_init(&a);
    s = gw_arena_str(&a, (struct gw_str){src, 11});
    assert_int_equal(s.len, 11);
    assert_true(s.ptr != src);
    assert_memory_equal(s.ptr, src, 11);
    assert_int_equal(s.ptr[11], '\0');
    src[0] = 'J'; /* a copy: the source may change */
    assert_int_equal(s.ptr[0], 'h');
    s = gw_arena_str(&a, (struct gw_str){NULL, 0});
    assert_non_null(s.ptr);
    assert_int_equal(s.len, 0);
    assert_string_equal(s.ptr, "");
    gw_alloc_fail_at(1);
    s = gw_arena_str(&a, GW_STR_LIT("no room for this one, a new block is needed"));
    gw_alloc_fail_at(0);
    /* the first block has room: no allocation was needed */
    assert_non_null(s.ptr);
    gw_arena_fini(&a);
    gw_alloc_fail_at(1);
    s = gw_arena_str(&a, GW_STR_LIT("x"));
    gw_alloc_fail_at(0);
    assert_null(s.ptr);
    assert_int_equal(s.len, 0);
    gw_arena_fini(&a);
}

struct t_item {
    uint64_t a, b;
    char c;
};

static void
test_arena_push_grows_zeroed_and_keeps_contents(void **state)
{
    struct t_item *v = NULL, *old;
    size_t n = 0, cap = 0, i;
    struct gw_arena a;

    (void)state;
    gw_arena_init(&a);
    for (i = 0; i < 100; i++) {
        struct t_item *it = gw_arena_push(&a, (void **)&v, &n, &cap, sizeof(*v));

        assert_non_null(it);
        assert_ptr_equal(it, &v[i]);
        assert_int_equal(it->a + it->b + (uint64_t)it->c, 0); /* zeroed */
        it->a = i;
        it->b = i * 3;
        it->c = (char)i;
        assert_int_equal(n, i + 1);
        assert_true(cap >= n);
        assert_true(cap == 4 || (cap & (cap - 1)) == 0); /* 4, 8, 16...: doubles */
    }
    for (i = 0; i < 100; i++) {
        assert_int_equal(v[i].a, i);
        assert_int_equal(v[i].b, i * 3);
        assert_int_equal(v[i].c, (char)i);
    }
    /* a failed growth leaves the array as it was */
    while (n < cap)
        assert_non_null(gw_arena_push(&a, (void **)&v, &n, &cap, sizeof(*v)));
    old = v;
    gw_alloc_fail_at(1);
    assert_null(gw_arena_push(&a, (void **)&v, &n, &cap, sizeof(*v)));
    gw_alloc_fail_at(0);
    assert_ptr_equal(v, old);
    assert_int_equal(n, cap);
    assert_int_equal(v[99].a, 99);
    /* an element size that overflows the new capacity */
    {
        void *w = NULL;
        size_t wn = 0, wcap = 0;

        assert_null(gw_arena_push(&a, &w, &wn, &wcap, SIZE_MAX / 2));
        assert_null(w);
        assert_int_equal(wn, 0);
    }
    gw_arena_fini(&a);
}

/* Cleanups record their order; each reads a byte of arena memory, which must still be
 * there when it runs. */
struct t_cleanup {
    char log[16];
    size_t n;
    const char *mem;
};

struct t_cleanup_arg {
    struct t_cleanup *c;
    char id;
};

static void
t_on_free(void *arg)
{
    struct t_cleanup_arg *x = arg;

    x->c->log[x->c->n++] = x->id;
    assert_int_equal(x->c->mem[0], 'M');
}

static void
test_arena_on_free_runs_newest_first_before_the_memory_goes(void **state)
{
    struct t_cleanup c = {{0}, 0, NULL};
    struct t_cleanup_arg args[3] = {{&c, 'a'}, {&c, 'b'}, {&c, 'c'}};
    struct gw_arena a;
    char *mem;
    size_t i;

    (void)state;
    gw_arena_init(&a);
    mem = gw_arena_alloc(&a, 1);
    assert_non_null(mem); /* may fail under `make test-oom` */
    *mem = 'M';
    c.mem = mem;
    for (i = 0; i < 3; i++)
        assert_int_equal(gw_arena_on_free(&a, t_on_free, &args[i]), 1);
    gw_arena_fini(&a);
    assert_int_equal(c.n, 3);
    assert_memory_equal(c.log, "cba", 3);
    /* out of memory: 0, and the cleanup is not called */
    gw_alloc_fail_at(1);
    assert_int_equal(gw_arena_on_free(&a, t_on_free, &args[0]), 0);
    gw_alloc_fail_at(0);
    gw_arena_fini(&a);
    assert_int_equal(c.n, 3);
}

static void
test_arena_fini_empties_and_the_arena_is_reusable(void **state)
{
    struct gw_arena a;
    char *p;
    int round;

    (void)state;
    memset(&a, 0, sizeof(a)); /* a zeroed arena is an empty one */
    gw_arena_fini(&a);
    for (round = 0; round < 3; round++) {
        p = gw_arena_alloc(&a, 100);
        assert_non_null(p);
        memset(p, 'x', 100);
        assert_non_null(gw_arena_alloc(&a, 50000));
        assert_true(a.used >= 50100);
        gw_arena_fini(&a);
        assert_null(a.head);
        assert_null(a.cleanups);
        assert_int_equal(a.used, 0);
    }
}

/* A reset runs the cleanups and keeps up to <keep> default-size blocks: the next
 * request's allocations up to that much take no memory from malloc (an allocation that
 * would fails none of them); a large block is not kept; fini frees the kept ones. */
static void
test_arena_reset_keeps_blocks_for_the_next_use(void **state)
{
    struct t_cleanup c = {{0}, 0, NULL};
    struct t_cleanup_arg arg = {&c, 'r'};
    struct gw_arena a;
    char *p;
    int round, i;

    (void)state;
    gw_arena_init(&a);
    for (round = 0; round < 3; round++) {
        /* three blocks' worth, a large block, a cleanup */
        for (i = 0; i < 3; i++) {
            p = gw_arena_alloc(&a, 3000);
            assert_non_null(p);
            memset(p, 'a' + i, 3000);
        }
        assert_non_null(gw_arena_alloc(&a, 50000));
        p[0] = 'M'; /* t_on_free checks the memory is still there when it runs */
        c.mem = p;
        assert_int_equal(gw_arena_on_free(&a, t_on_free, &arg), 1);
        gw_arena_reset(&a, 2);
        assert_int_equal(c.n, round + 1); /* the cleanup ran */
        assert_null(a.head);
        assert_null(a.cleanups);
        assert_int_equal(a.used, 0);
        /* two blocks kept: two blocks' worth comes without malloc */
        gw_alloc_fail_at(1);
        for (i = 0; i < 2; i++) {
            p = gw_arena_alloc(&a, 3000);
            assert_non_null(p);
            memset(p, 'z', 3000);
        }
        /* a third block: malloc again (which fails here) */
        assert_null(gw_arena_alloc(&a, 3000));
        gw_alloc_fail_at(0);
        gw_arena_reset(&a, 2);
    }
    gw_arena_fini(&a); /* frees the kept blocks (ASan: no leak) */
    assert_null(a.spare);
}

static void
test_arena_allocation_failure_is_null_and_clean(void **state)
{
    unsigned long k;

    (void)state;
    for (k = 1; k <= 6; k++) {
        struct gw_arena a;
        size_t i, ok = 0;

        gw_arena_init(&a);
        gw_alloc_fail_at(k);
        for (i = 0; i < 6; i++)
            if (gw_arena_alloc(&a, 3000))
                ok++;
        gw_alloc_fail_at(0);
        assert_true(ok >= 1 || k == 1);
        assert_true(ok < 6); /* one of them met the failure */
        gw_arena_fini(&a);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_alloc_is_aligned_disjoint_and_counted),
        cmocka_unit_test(test_arena_reset_keeps_blocks_for_the_next_use),
        cmocka_unit_test(test_arena_large_allocation_keeps_the_current_blocks_room),
        cmocka_unit_test(test_arena_many_blocks_hold_their_bytes),
        cmocka_unit_test(test_arena_calloc_zeroes_and_checks_overflow),
        cmocka_unit_test(test_arena_str_copies_and_terminates),
        cmocka_unit_test(test_arena_push_grows_zeroed_and_keeps_contents),
        cmocka_unit_test(test_arena_on_free_runs_newest_first_before_the_memory_goes),
        cmocka_unit_test(test_arena_fini_empties_and_the_arena_is_reusable),
        cmocka_unit_test(test_arena_allocation_failure_is_null_and_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
