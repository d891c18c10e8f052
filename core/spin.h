/* SPDX-License-Identifier: MIT
 * core/spin.h - the spinlock of gw's shared core: test-and-test-and-set on GCC __atomic
 * builtins. Held for a few instructions, never across an allocation, a log call, a
 * callback or anything that blocks. Written with __atomic rather than ck_spinlock
 * because ck's loads are volatile accesses that ThreadSanitizer cannot model as
 * synchronisation (core/tsan.h), so TSan sees these locks for what they are.
 * Threads: any.
 */
#ifndef GW_CORE_SPIN_H
#define GW_CORE_SPIN_H

/* 0 = free, 1 = held; zero-initialised memory is an unlocked lock. */
struct gw_spin {
    int held;
};

static inline void
gw_spin_lock(struct gw_spin *l)
{
    for (;;) {
        /* ACQUIRE: pairs with gw_spin_unlock's RELEASE store, so the previous holder's
         * writes are visible once we own the lock. */
        if (__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE) == 0)
            return;
        /* Spin on a plain read so waiters do not bounce the line with writes. RELAXED:
         * it only decides when to retry; the exchange above provides the ordering. */
        while (__atomic_load_n(&l->held, __ATOMIC_RELAXED) != 0) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
}

static inline void
gw_spin_unlock(struct gw_spin *l)
{
    /* RELEASE: this holder's writes happen before the next holder's ACQUIRE exchange. */
    __atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
}

#endif
