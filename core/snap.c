/* SPDX-License-Identifier: MIT
 * core/snap.c - publish, acquire and retire configuration snapshots.
 * The live pointer holds one reference. A reader enters an epoch section, loads the
 * pointer and takes a reference before leaving it, so a retired snapshot cannot be
 * freed between the load and the increment. The publisher swaps the pointer and
 * retires the old one with ck_epoch_call; once the grace period has passed, the
 * retirement drops the live reference, and the last release frees it.
 * Owns:    the live pointer; the global epoch.
 * Threads: publish/poll/shutdown on main; acquire/release on any registered thread.
 * See:     core/snap.h, tests/unit/core/test_snap.c
 */
#include "core/snap.h"

#include <ck_pr.h>
#include <stddef.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/tsan.h"

static ck_epoch_t snap_epoch;
static struct gw_conf *gw_conf_live;

void
gw_snap_init(void)
{
    static bool epoch_ready;

    /* The epoch keeps its records (they are recycled, never freed), so it is set up
     * once per process; a second call (tests) only clears the live pointer. */
    if (!epoch_ready) {
        ck_epoch_init(&snap_epoch);
        epoch_ready = true;
    }
    gw_conf_live = NULL;
}

void
gw_thread_register(struct gw_thread *t)
{
    /* ck_epoch_recycle reuses a record left by a thread that unregistered. */
    t->epoch = ck_epoch_recycle(&snap_epoch, NULL);
    if (t->epoch)
        return;
    t->epoch = gw_calloc(1, sizeof(*t->epoch));
    GW_ASSERT_ALLOC(t->epoch);
    ck_epoch_register(&snap_epoch, t->epoch, NULL);
}

void
gw_thread_unregister(struct gw_thread *t)
{
    if (!t->epoch)
        return;
    /* The record stays allocated in the epoch's list and is recycled by the next
     * thread that registers (ck records are never freed while the epoch lives). */
    ck_epoch_unregister(t->epoch);
    t->epoch = NULL;
}

struct gw_conf *
gw_conf_acquire(struct gw_thread *t)
{
    struct gw_conf *c;

    ck_epoch_begin(t->epoch, NULL);
    c = ck_pr_load_ptr(&gw_conf_live); /* pairs with the publisher's fence */
    GW_TSAN_ACQUIRE(&gw_conf_live);
    /* Relaxed: the epoch section, not this increment, keeps c alive until it is done.
     * The count uses GCC's __atomic builtins rather than ck_pr: ck's decrement-to-zero
     * is a CAS loop over a volatile load that ThreadSanitizer cannot model. */
    if (c)
        __atomic_fetch_add(&c->ref, 1, __ATOMIC_RELAXED); /* c cannot be reclaimed in here */
    ck_epoch_end(t->epoch, NULL);
    return c;
}

void
gw_conf_release(struct gw_conf *c)
{
    if (!c)
        return;
    /* Acquire-release: every holder's reads of *c happen before the thread that takes
     * the count to zero frees it. */
    if (__atomic_sub_fetch(&c->ref, 1, __ATOMIC_ACQ_REL) == 0)
        gw_conf_free(c);
}

static void
on_retired(ck_epoch_entry_t *e)
{
    struct gw_conf *c = (struct gw_conf *)((char *)e - offsetof(struct gw_conf, epoch_entry));

    gw_conf_release(c); /* the live pointer's reference */
}

void
gw_conf_publish(struct gw_thread *t, struct gw_conf *c)
{
    struct gw_conf *old;

    c->ref = 1; /* the live pointer's reference */
    old = ck_pr_load_ptr(&gw_conf_live);
    c->generation = old ? old->generation + 1 : 1;
    /* Store fence: every field of *c is visible before the pointer is. */
    ck_pr_fence_store();
    GW_TSAN_RELEASE(&gw_conf_live);
    ck_pr_store_ptr(&gw_conf_live, c);
    if (old)
        ck_epoch_call(t->epoch, &old->epoch_entry, on_retired);
}

void
gw_snap_poll(struct gw_thread *t)
{
    ck_epoch_poll(t->epoch);
}

void
gw_snap_shutdown(struct gw_thread *t)
{
    struct gw_conf *old = ck_pr_load_ptr(&gw_conf_live);

    ck_pr_store_ptr(&gw_conf_live, NULL);
    if (old)
        ck_epoch_call(t->epoch, &old->epoch_entry, on_retired);
    /* Waits for every reader section to end and runs the retirement callbacks. */
    ck_epoch_barrier(t->epoch);
}
