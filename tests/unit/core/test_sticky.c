/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_sticky.c - the conversation stickiness table: within-turn and
 * across-turn rules, the 5 minute edge, forget, key separation, eviction of the oldest,
 * name limits, out of memory, and 4 threads on overlapping keys (run under TSan by hand:
 * see the comment above test_sticky_threads_share_the_table).
 * See: core/sticky.c
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/sticky.h"

#define T0 1700000000000ULL

static uint64_t
t_key(const char *a, const char *b)
{
    const void *parts[2] = {a, b};
    size_t lens[2] = {strlen(a), strlen(b)};

    return gw_sticky_key(parts, lens, 2);
}

static void
test_sticky_within_turn_sticks_without_cache_tokens(void **state)
{
    struct gw_sticky *t = gw_sticky_new(1024);
    char out[GW_NAME_MAX + 1] = "untouched";
    uint64_t k = t_key("client-a", "conv-1");

    (void)state;
    assert_non_null(t);
    assert_false(gw_sticky_lookup(t, k, T0, true, out)); /* unknown */
    assert_string_equal(out, "untouched");
    gw_sticky_record(t, k, "alpha", T0, 0);
    assert_true(gw_sticky_lookup(t, k, T0 + 1000, true, out));
    assert_string_equal(out, "alpha");
    /* Within a turn the age does not matter either. */
    assert_true(gw_sticky_lookup(t, k, T0 + 24 * 3600 * 1000ULL, true, out));
    assert_string_equal(out, "alpha");
    /* Across turns, no cache tokens: not sticky, <out> untouched. */
    strcpy(out, "untouched");
    assert_false(gw_sticky_lookup(t, k, T0 + 1000, false, out));
    assert_string_equal(out, "untouched");
    gw_sticky_free(t);
}

static void
test_sticky_across_turns_needs_1024_cache_tokens(void **state)
{
    struct gw_sticky *t = gw_sticky_new(1024);
    char out[GW_NAME_MAX + 1];
    uint64_t k = t_key("client-a", "conv-2");

    (void)state;
    assert_non_null(t);
    gw_sticky_record(t, k, "alpha", T0, 1023);
    assert_false(gw_sticky_lookup(t, k, T0 + 1000, false, out));
    gw_sticky_record(t, k, "beta", T0 + 2000, 1024);
    assert_true(gw_sticky_lookup(t, k, T0 + 3000, false, out));
    assert_string_equal(out, "beta"); /* the latest record replaced the first */
    gw_sticky_free(t);
}

static void
test_sticky_across_turns_expires_at_five_minutes(void **state)
{
    struct gw_sticky *t = gw_sticky_new(1024);
    char out[GW_NAME_MAX + 1];
    uint64_t k = t_key("client-a", "conv-3");

    (void)state;
    assert_non_null(t);
    gw_sticky_record(t, k, "gamma", T0, 5000);
    assert_true(gw_sticky_lookup(t, k, T0 + 299999, false, out));
    assert_string_equal(out, "gamma");
    assert_false(gw_sticky_lookup(t, k, T0 + 300000, false, out)); /* exactly 5 min */
    assert_false(gw_sticky_lookup(t, k, T0 + 900000, false, out));
    assert_true(gw_sticky_lookup(t, k, T0 + 300000, true, out)); /* within a turn: yes */
    /* A lookup clock slightly behind the recorder's counts as age 0. */
    assert_true(gw_sticky_lookup(t, k, T0 - 5, false, out));
    gw_sticky_free(t);
}

static void
test_sticky_forget_drops_the_conversation(void **state)
{
    struct gw_sticky *t = gw_sticky_new(1024);
    char out[GW_NAME_MAX + 1];
    uint64_t k = t_key("client-a", "conv-4"), other = t_key("client-a", "conv-5");

    (void)state;
    assert_non_null(t);
    gw_sticky_record(t, k, "alpha", T0, 4096);
    gw_sticky_record(t, other, "beta", T0, 4096);
    gw_sticky_forget(t, k);
    assert_false(gw_sticky_lookup(t, k, T0 + 1, true, out));
    assert_false(gw_sticky_lookup(t, k, T0 + 1, false, out));
    assert_true(gw_sticky_lookup(t, other, T0 + 1, false, out));
    assert_string_equal(out, "beta");
    gw_sticky_forget(t, k); /* unknown now: fine */
    gw_sticky_forget(t, t_key("nobody", "nothing"));
    gw_sticky_record(t, k, "gamma", T0 + 2, 0); /* and it can come back */
    assert_true(gw_sticky_lookup(t, k, T0 + 3, true, out));
    assert_string_equal(out, "gamma");
    gw_sticky_free(t);
}

static void
test_sticky_key_separates_parts(void **state)
{
    const void *p3[3];
    size_t l3[3];
    const void *p1[1] = {"abc"};
    size_t l1[1] = {3};
    char long_a[100], long_b[100];

    (void)state;
    assert_true(t_key("ab", "c") != t_key("a", "bc"));
    assert_true(t_key("", "abc") != t_key("abc", ""));
    assert_true(t_key("ab", "c") != gw_sticky_key(p1, l1, 1));
    assert_true(t_key("ab", "c") == t_key("ab", "c")); /* deterministic */
    assert_true(t_key("client-a", "x") != t_key("client-b", "x"));
    /* Parts longer than a block differ in their last byte only. */
    memset(long_a, 'q', sizeof(long_a) - 1);
    long_a[sizeof(long_a) - 1] = '\0';
    memcpy(long_b, long_a, sizeof(long_b));
    long_b[sizeof(long_b) - 2] = 'r';
    assert_true(t_key("k", long_a) != t_key("k", long_b));
    /* A trailing empty part is still a part; an empty part may be NULL. */
    p3[0] = "ab";
    l3[0] = 2;
    p3[1] = "c";
    l3[1] = 1;
    p3[2] = NULL;
    l3[2] = 0;
    assert_true(gw_sticky_key(p3, l3, 3) != t_key("ab", "c"));
    assert_true(gw_sticky_key(p3, l3, 3) != 0);
    assert_true(gw_sticky_key(NULL, NULL, 0) != 0);
}

static void
test_sticky_eviction_keeps_the_newest(void **state)
{
    struct gw_sticky *t = gw_sticky_new(5); /* rounded up to 8: one shard, one window */
    char out[GW_NAME_MAX + 1];
    uint64_t keys[10];

    (void)state;
    assert_non_null(t);
    for (int i = 0; i < 10; i++) {
        char id[32];

        snprintf(id, sizeof(id), "conv-%d", i);
        keys[i] = t_key("client-a", id);
    }
    for (int i = 0; i < 8; i++)
        gw_sticky_record(t, keys[i], "alpha", T0 + (uint64_t)i * 10, 0);
    for (int i = 0; i < 8; i++)
        assert_true(gw_sticky_lookup(t, keys[i], T0 + 100, true, out));
    /* Full: the ninth evicts the oldest (keys[0]). */
    gw_sticky_record(t, keys[8], "beta", T0 + 80, 0);
    assert_false(gw_sticky_lookup(t, keys[0], T0 + 100, true, out));
    for (int i = 1; i < 9; i++)
        assert_true(gw_sticky_lookup(t, keys[i], T0 + 100, true, out));
    /* Recording again refreshes: keys[1] is new now, so keys[2] goes next. */
    gw_sticky_record(t, keys[1], "gamma", T0 + 90, 0);
    gw_sticky_record(t, keys[9], "delta", T0 + 95, 0);
    assert_false(gw_sticky_lookup(t, keys[2], T0 + 100, true, out));
    assert_true(gw_sticky_lookup(t, keys[1], T0 + 100, true, out));
    assert_string_equal(out, "gamma");
    assert_true(gw_sticky_lookup(t, keys[9], T0 + 100, true, out));
    assert_string_equal(out, "delta");
    /* A forgotten slot is reused before anything is evicted. */
    gw_sticky_forget(t, keys[9]);
    gw_sticky_record(t, keys[0], "alpha", T0 + 99, 0);
    for (int i = 3; i < 9; i++)
        assert_true(gw_sticky_lookup(t, keys[i], T0 + 100, true, out));
    assert_true(gw_sticky_lookup(t, keys[0], T0 + 100, true, out));
    gw_sticky_free(t);
}

static void
test_sticky_provider_name_limits(void **state)
{
    struct gw_sticky *t = gw_sticky_new(64);
    char out[GW_NAME_MAX + 1], name[GW_NAME_MAX + 2];
    uint64_t k = t_key("client-a", "conv-names");

    (void)state;
    assert_non_null(t);
    memset(name, 'p', GW_NAME_MAX);
    name[GW_NAME_MAX] = '\0'; /* 64 characters: the longest name */
    gw_sticky_record(t, k, name, T0, 0);
    assert_true(gw_sticky_lookup(t, k, T0, true, out));
    assert_string_equal(out, name);
    name[GW_NAME_MAX] = 'p';
    name[GW_NAME_MAX + 1] = '\0'; /* 65: not recorded, and the key is forgotten */
    gw_sticky_record(t, k, name, T0 + 1, 0);
    assert_false(gw_sticky_lookup(t, k, T0 + 1, true, out));
    /* Key 0 is never stored. */
    gw_sticky_record(t, 0, "alpha", T0, 4096);
    assert_false(gw_sticky_lookup(t, 0, T0, true, out));
    gw_sticky_forget(t, 0);
    gw_sticky_free(t);
}

static void
test_sticky_new_returns_null_when_out_of_memory(void **state)
{
    (void)state;
    gw_alloc_fail_at(1);
    assert_null(gw_sticky_new(1024));
    gw_alloc_fail_at(0);
    assert_null(gw_sticky_new(SIZE_MAX));     /* too large to round up */
    assert_null(gw_sticky_new(SIZE_MAX / 4)); /* too large to allocate */
    gw_sticky_free(NULL);
}

/* ---- threads ---- */

#define T_THREADS 4
#define T_KEYS 48
#define T_ITERS 100000

static const char *const t_names[T_THREADS] = {"alpha", "beta-provider", "g", "delta-42"};

struct t_worker {
    struct gw_sticky *t;
    const uint64_t *keys;
    int id;
    unsigned long hits, torn; /* torn: a name that no thread ever recorded */
};

static void *
t_hammer(void *arg)
{
    struct t_worker *w = arg;
    char out[GW_NAME_MAX + 1];
    uint32_t x = 2463534242u + (uint32_t)w->id; /* xorshift: a fixed sequence per thread */

    for (unsigned long i = 0; i < T_ITERS; i++) {
        uint64_t key;
        unsigned op;

        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        key = w->keys[x % T_KEYS];
        op = (x >> 8) % 8;
        if (op < 3) {
            gw_sticky_record(w->t, key, t_names[w->id], T0 + i, 2048);
        } else if (op == 3) {
            gw_sticky_forget(w->t, key);
        } else if (gw_sticky_lookup(w->t, key, T0 + i, op & 1, out)) {
            bool known = false;

            w->hits++;
            for (int n = 0; n < T_THREADS; n++)
                known = known || strcmp(out, t_names[n]) == 0;
            if (!known)
                w->torn++;
        }
    }
    return NULL;
}

/* 4 threads record, look up and forget 48 overlapping keys in a 32-entry table (so
 * evictions race too). A name read back must be one that was written whole. For the
 * race detector, build by hand with -fsanitize=thread -DCK_USE_CC_BUILTINS=1 and run
 * with TSAN_OPTIONS=suppressions=tests/tsan.supp: no reports expected. */
static void
test_sticky_threads_share_the_table(void **state)
{
    struct gw_sticky *t = gw_sticky_new(32);
    struct t_worker w[T_THREADS];
    pthread_t th[T_THREADS];
    uint64_t keys[T_KEYS];
    unsigned long hits = 0;

    (void)state;
    assert_non_null(t);
    for (int i = 0; i < T_KEYS; i++) {
        char id[32];

        snprintf(id, sizeof(id), "conv-%d", i);
        keys[i] = t_key("client-a", id);
    }
    for (int i = 0; i < T_THREADS; i++) {
        w[i] = (struct t_worker){.t = t, .keys = keys, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, t_hammer, &w[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].torn, 0);
        hits += w[i].hits;
    }
    assert_true(hits > 0);
    gw_sticky_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sticky_within_turn_sticks_without_cache_tokens),
        cmocka_unit_test(test_sticky_across_turns_needs_1024_cache_tokens),
        cmocka_unit_test(test_sticky_across_turns_expires_at_five_minutes),
        cmocka_unit_test(test_sticky_forget_drops_the_conversation),
        cmocka_unit_test(test_sticky_key_separates_parts),
        cmocka_unit_test(test_sticky_eviction_keeps_the_newest),
        cmocka_unit_test(test_sticky_provider_name_limits),
        cmocka_unit_test(test_sticky_new_returns_null_when_out_of_memory),
        cmocka_unit_test(test_sticky_threads_share_the_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
