/* SPDX-License-Identifier: MIT
 * core/assert.h - internal invariants. GW_ASSERT is on in every build; GW_DASSERT only
 * in debug builds (costly checks). Never used on input from clients, upstreams,
 * config or disk: those get a message code. GW_ASSERT_ALLOC is for allocations at
 * boot or thread start, where running out of memory ends the process with a message.
 * Threads: any.
 */
#ifndef GW_CORE_ASSERT_H
#define GW_CORE_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define GW_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (__builtin_expect(!(cond), 0)) {                                                        \
            fprintf(stderr, "gw: assertion failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#ifdef GW_DEBUG
#define GW_DASSERT(cond) GW_ASSERT(cond)
#else
#define GW_DASSERT(cond) ((void)0)
#endif

#define GW_ASSERT_ALLOC(p)                                                                         \
    do {                                                                                           \
        if (!(p)) {                                                                                \
            fprintf(stderr, "gw: out of memory at startup (%s:%d)\n", __FILE__, __LINE__);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Objects that start with a magic number are checked on every use. */
#define GW_CHECK_OBJ(p, magic) GW_ASSERT((p) != NULL && (p)->magic_ == (magic))

#endif
