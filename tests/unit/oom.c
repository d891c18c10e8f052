/* SPDX-License-Identifier: MIT
 * tests/unit/oom.c - the hook of `make test-oom` (STYLE.md 11), linked into every unit
 * test binary. It does nothing unless GW_OOM_FAIL or GW_OOM_LIST is set;
 * tools/test-oom.py sets:
 *   GW_OOM_LIST=1       print the binary's test names ("gw-oom: test <name>"), run none;
 *   GW_OOM_TEST=<name>  run only that test of the binary (cmocka's test filter);
 *   GW_OOM_FAIL=<k>     number every allocation through core/alloc.h from the start
 *                       of the process and fail the k-th (0: only count);
 *   GW_OOM_JANSSON=1    route jansson's allocations through gw_malloc as well, so they
 *                       count and fail in turn too (off by default: jansson 2.14
 *                       itself crashes in json_loadb when some of them fail);
 *   GW_OOM_SITES=<file> write "<n> <pc>..." for every allocation: its number and the
 *                       return addresses of its stack, so that the runner fails each
 *                       allocation site in its calling context rather than each
 *                       iteration of a loop;
 *   GW_OOM_STACK=1      print the stack of the failed allocation (to find it).
 * At exit it prints "gw-oom: allocations=<n> failed=<k>|none".
 * Leaks (ASan builds, run with ASAN_OPTIONS=detect_leaks=1:leak_check_at_exit=0): a
 * test whose assertion fails under OOM is left by cmocka's longjmp, abandoning what its
 * frame holds. So the leak check runs at that moment, from the longjmp, while the
 * test's frame still points at its objects: whatever is unreachable then was lost by
 * the code under test. When no test was left that way, the check runs at exit.
 * Threads: the constructor and the exit hook on main; on_alloc on any thread.
 * See:     core/alloc.h (gw_alloc_trace), tools/test-oom.py
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "core/alloc.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#define OOM_LSAN 1
static int oom_left; /* a test was left by cmocka's longjmp (main thread) */
#else
#define OOM_LSAN 0
#endif

#define OOM_SITE_DEPTH 16

static int oom_on;          /* GW_OOM_FAIL was set */
static unsigned long oom_k; /* the allocation that fails; 0 = none */
static int oom_stack;       /* GW_OOM_STACK was set */
static FILE *oom_sites;     /* GW_OOM_SITES, or NULL */
static int oom_failed;      /* the k-th allocation was failed (any thread: __atomic) */

static bool
on_alloc(unsigned long n)
{
    if (oom_sites) {
        void *pc[OOM_SITE_DEPTH];
        int depth = backtrace(pc, OOM_SITE_DEPTH);

        /* stdio locks the stream: threads of a test write whole lines */
        flockfile(oom_sites);
        fprintf(oom_sites, "%lu", n);
        for (int i = 0; i < depth; i++)
            fprintf(oom_sites, " %p", pc[i]);
        fputc('\n', oom_sites);
        funlockfile(oom_sites);
    }
    if (n != oom_k)
        return false;
    /* RELAXED: read by the exit hook on main after every thread of the test joined. */
    __atomic_store_n(&oom_failed, 1, __ATOMIC_RELAXED);
    if (oom_stack) {
        fprintf(stderr, "gw-oom: allocation %lu fails here:\n", oom_k);
#if OOM_LSAN
        __sanitizer_print_stack_trace();
#endif
    }
    return true;
}

static void
on_exit_report(void)
{
    unsigned long n = gw_alloc_traced();

    gw_alloc_trace(NULL);
    if (oom_sites)
        fclose(oom_sites);
    if (__atomic_load_n(&oom_failed, __ATOMIC_RELAXED))
        fprintf(stderr, "gw-oom: allocations=%lu failed=%lu\n", n, oom_k);
    else
        fprintf(stderr, "gw-oom: allocations=%lu failed=none\n", n);
#if OOM_LSAN
    if (!oom_left)
        (void)__lsan_do_recoverable_leak_check();
#endif
}

__attribute__((constructor)) static void
oom_init(void)
{
    const char *k = getenv("GW_OOM_FAIL");
    const char *t = getenv("GW_OOM_TEST");
    const char *sites = getenv("GW_OOM_SITES");

    if (!k)
        return;
    if (t && *t)
        cmocka_set_test_filter(t);
    oom_k = strtoul(k, NULL, 10);
    oom_stack = getenv("GW_OOM_STACK") != NULL;
    if (sites && *sites) {
        oom_sites = fopen(sites, "w");
        if (!oom_sites) {
            perror(sites);
            exit(2);
        }
    }
    if (getenv("GW_OOM_JANSSON"))
        json_set_alloc_funcs(gw_malloc, gw_free);
    oom_on = 1;
    atexit(on_exit_report);
    gw_alloc_trace(on_alloc);
}

typedef int (*run_group_fn)(const char *group_name, const struct CMUnitTest *const tests,
                            const size_t num_tests, CMFixtureFunction group_setup,
                            CMFixtureFunction group_teardown);

/* Every unit binary's main() calls this (cmocka_run_group_tests is a macro for it);
 * this definition comes first at link time. With GW_OOM_LIST set it prints the
 * group's test names and runs none; otherwise it calls cmocka's. */
int
_cmocka_run_group_tests(const char *group_name, const struct CMUnitTest *const tests,
                        const size_t num_tests, CMFixtureFunction group_setup,
                        CMFixtureFunction group_teardown)
{
    run_group_fn next;

    if (getenv("GW_OOM_LIST")) {
        for (size_t i = 0; i < num_tests; i++)
            printf("gw-oom: test %s\n", tests[i].name);
        return 0;
    }
    next = (run_group_fn)dlsym(RTLD_NEXT, "_cmocka_run_group_tests");
    if (!next) {
        fprintf(stderr, "gw-oom: cmocka's _cmocka_run_group_tests not found\n");
        return 1;
    }
    return next(group_name, tests, num_tests, group_setup, group_teardown);
}

#if OOM_LSAN
/* cmocka leaves a failed test with longjmp, which libcmocka calls as glibc's
 * __longjmp_chk. This definition in the executable comes first in symbol lookup, so it
 * sees every such exit; it checks for leaks once, then jumps through the next
 * definition (ASan's interceptor, which calls glibc's). */
void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

typedef void (*longjmp_fn)(struct __jmp_buf_tag env[1], int val);

void
__longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
    static longjmp_fn next;

    if (oom_on && !oom_left) {
        oom_left = 1;
        fprintf(stderr, "gw-oom: leak check as the test is left\n");
        (void)__lsan_do_recoverable_leak_check();
    }
    if (!next)
        next = (longjmp_fn)dlsym(RTLD_NEXT, "__longjmp_chk");
    next(env, val);
    __builtin_unreachable();
}
#endif
