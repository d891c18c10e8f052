/* SPDX-License-Identifier: MIT
 * core/tsan.h - happens-before annotations for ThreadSanitizer builds.
 * ConcurrencyKit's loads and stores on x86-64 are volatile accesses with compiler
 * fences, which are atomic on this platform but invisible to TSan as synchronisation.
 * Where a ck structure hands an object from one thread to another (an MPSC ring, the
 * snapshot pointer, a reference count reaching zero), the code states the edge with
 * GW_TSAN_RELEASE on the sending side and GW_TSAN_ACQUIRE on the receiving side, on the
 * same address. In every other build they compile to nothing.
 * Races reported inside ck itself are suppressed in tests/tsan.supp.
 */
#ifndef GW_CORE_TSAN_H
#define GW_CORE_TSAN_H

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define GW_TSAN_RELEASE(addr) __tsan_release((void *)(addr))
#define GW_TSAN_ACQUIRE(addr) __tsan_acquire((void *)(addr))
#else
#define GW_TSAN_RELEASE(addr) ((void)0)
#define GW_TSAN_ACQUIRE(addr) ((void)0)
#endif

#endif
