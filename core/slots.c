/* SPDX-License-Identifier: MIT
 * core/slots.c - admission semaphores: counting semaphores with FIFO waiters, and groups
 * that wait on several of them and take the first slot to free.
 * A gw_slots is a limit, a count of slots held and an intrusive doubly linked FIFO of
 * waiters, all behind one test-and-test-and-set spinlock written with GCC __atomic
 * builtins (exchange with ACQUIRE to take it, store with RELEASE to drop it) rather than
 * ck_spinlock, whose loads are volatile accesses that ThreadSanitizer cannot model as
 * synchronisation. The lock is held for a few pointer moves and counter updates; grant
 * callbacks run after it is dropped, and nothing here allocates under it.
 * Groups: each gw_slots_wait has one atomic state word, the "won" flag:
 *     WAITING --(a grant's CAS, under the granting slots' lock)--> GRANTING
 *     GRANTING --(the grant fn returned; RELEASE store)--> WON
 *     WAITING --(gw_slots_wait_add took a free slot; CAS)--> WON
 *     WAITING --(gw_slots_wait_cancel's CAS)--> CANCELLED
 *     WON | CANCELLED --(gw_slots_wait_cancel removed every waiter)--> DONE
 * Only one compare-and-swap out of WAITING can succeed, so a slot has exactly one owner
 * when a grant and a cancel race. A grant popping a waiter whose group is no longer
 * WAITING drops it and looks at the next one, so a stale waiter never holds a slot.
 * Lifetime argument: a releaser reads a waiter's group only while holding the lock of
 * the FIFO the waiter is on, and the owner's cancel takes that same lock to remove it,
 * so the group is alive; after a winning CAS the releaser touches the group until its
 * WON store, and cancel spins until it sees WON, so the group outlives that too.
 * Invariant (under the lock): a non-empty FIFO means in_use >= max (max != 0): every
 * release, resize and add hands free slots to the queue first, so gw_slots_try only
 * ever succeeds when nobody waits.
 * Owns:    the registry owns every gw_slots and its name.
 * Threads: slots and groups on any thread; registry calls on main only.
 * See:     core/slots.h, tests/unit/core/test_slots.c
 */
#include "core/slots.h"

#include <stddef.h>
#include <string.h>

#include "core/alloc.h"
#include "core/namereg.h"
#include "core/spin.h"
#include "core/assert.h"

enum slots_wait_state {
    SW_DONE = 0, /* not started, or ended by gw_slots_wait_cancel */
    SW_WAITING,
    SW_GRANTING, /* won by a grant whose fn has not returned yet */
    SW_WON,
    SW_CANCELLED,
};

/* Owned by the registry (gw_slots_reg.v); never moves or dies before gw_slots_reg_free. */
struct gw_slots {
    struct gw_spin lock;
    /* ---- guarded by lock ---- */
    unsigned max;     /* 0 = no limit */
    unsigned in_use;  /* slots held (may exceed max after a shrink) */
    unsigned waiting; /* waiters in the FIFO */
    struct gw_slots_waiter *head, *tail;
    /* ---- written once by main before the pointer is shared ---- */
    const char *name; /* the registry's copy */
};

/* Registry: touched by main only, so a plain growing array. */
struct gw_slots_reg {
    struct gw_namereg names;
};

/* ---- lock ---- */

static void
slots_lock(struct gw_slots *s)
{
    gw_spin_lock(&s->lock);
}

static void
slots_unlock(struct gw_slots *s)
{
    gw_spin_unlock(&s->lock);
}

/* ---- registry (main thread) ---- */

struct gw_slots_reg *
gw_slots_reg_new(void)
{
    return gw_calloc(1, sizeof(struct gw_slots_reg));
}

void
gw_slots_reg_free(struct gw_slots_reg *r)
{
    if (!r)
        return;
    gw_namereg_fini(&r->names);
    gw_free(r);
}

struct gw_slots *
gw_slots_reg_get(struct gw_slots_reg *r, const char *name)
{
    const char *copy;
    bool created;
    struct gw_slots *s = gw_namereg_get(&r->names, name, sizeof(*s), &created, &copy);

    if (s && created)
        s->name = copy;
    return s;
}

size_t
gw_slots_reg_count(const struct gw_slots_reg *r)
{
    return r->names.n;
}

struct gw_slots *
gw_slots_reg_at(const struct gw_slots_reg *r, size_t i)
{
    return gw_namereg_at(&r->names, i);
}

const char *
gw_slots_name(const struct gw_slots *s)
{
    return s->name;
}

/* ---- FIFO (lock held) ---- */

static void
fifo_push(struct gw_slots *s, struct gw_slots_waiter *w)
{
    w->next = NULL;
    w->prev = s->tail;
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    w->queued = true;
    s->waiting++;
}

static void
fifo_remove(struct gw_slots *s, struct gw_slots_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        s->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        s->tail = w->prev;
    w->next = w->prev = NULL;
    w->queued = false;
    s->waiting--;
}

static bool
slots_has_room(const struct gw_slots *s)
{
    return s->max == 0 || s->in_use < s->max;
}

/* Hands free slots of <s> to the FIFO, head first, while the limit allows. Each waiter
 * whose group is still WAITING wins (GRANTING, in_use + 1) and is chained on the
 * returned list through its now unused <next> link; the others are stale and dropped.
 * Lock held; the caller runs slots_notify on the list after dropping it. */
static struct gw_slots_waiter *
slots_fill(struct gw_slots *s)
{
    struct gw_slots_waiter *granted = NULL, **tailp = &granted;

    while (s->head && slots_has_room(s)) {
        struct gw_slots_waiter *w = s->head;
        struct gw_slots_wait *g = w->group;
        int expect = SW_WAITING;

        fifo_remove(s, w);
        /* ACQ_REL: the one CAS out of WAITING that succeeds decides who owns the slot
         * (it races with other grants and with gw_slots_wait_cancel's CAS). */
        if (!__atomic_compare_exchange_n(&g->state, &expect, SW_GRANTING, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue; /* the group won elsewhere or gave up: pass the slot on */
        g->won = w->index;
        s->in_use++;
        *tailp = w;
        tailp = &w->next;
    }
    return granted;
}

/* Tells each granted waiter's group, outside every lock: the grant fn, then the WON
 * store, after which the group may be freed by its owner (so <next> is read first). */
static void
slots_notify(struct gw_slots_waiter *w, gw_slots_grant_fn fn, void *ctx)
{
    while (w) {
        struct gw_slots_waiter *next = w->next;
        struct gw_slots_wait *g = w->group;

        if (fn)
            fn(ctx, g, w->index);
        /* RELEASE: our writes to <g> (g->won) and the fn's reads of it happen before
         * gw_slots_wait_cancel's ACQUIRE load that sees WON and lets the owner free it. */
        __atomic_store_n(&g->state, SW_WON, __ATOMIC_RELEASE);
        w = next;
    }
}

/* ---- slots (any thread) ---- */

bool
gw_slots_try(struct gw_slots *s)
{
    bool took = false;

    slots_lock(s);
    if (!s->head && slots_has_room(s)) {
        s->in_use++;
        took = true;
    }
    slots_unlock(s);
    return took;
}

void
gw_slots_release(struct gw_slots *s, gw_slots_grant_fn fn, void *ctx)
{
    struct gw_slots_waiter *granted;

    slots_lock(s);
    GW_ASSERT(s->in_use > 0);
    s->in_use--;
    granted = slots_fill(s);
    slots_unlock(s);
    slots_notify(granted, fn, ctx);
}

void
gw_slots_resize(struct gw_slots *s, unsigned max, gw_slots_grant_fn fn, void *ctx)
{
    struct gw_slots_waiter *granted;

    slots_lock(s);
    s->max = max;
    granted = slots_fill(s);
    slots_unlock(s);
    slots_notify(granted, fn, ctx);
}

void
gw_slots_stats(struct gw_slots *s, unsigned *max, unsigned *in_use, unsigned *waiting)
{
    unsigned m, u, w;

    slots_lock(s);
    m = s->max;
    u = s->in_use;
    w = s->waiting;
    slots_unlock(s);
    if (max)
        *max = m;
    if (in_use)
        *in_use = u;
    if (waiting)
        *waiting = w;
}

/* ---- groups (the owner's thread) ---- */

void
gw_slots_wait_init(struct gw_slots_wait *g, void *owner, unsigned worker)
{
    memset(g, 0, sizeof(*g));
    g->owner = owner;
    g->worker = worker;
    /* RELAXED: no other thread can see <g> before gw_slots_wait_add publishes a waiter
     * under a slots lock, whose RELEASE carries this store along. */
    __atomic_store_n(&g->state, SW_WAITING, __ATOMIC_RELAXED);
}

bool
gw_slots_wait_add(struct gw_slots_wait *g, struct gw_slots *s, unsigned index)
{
    struct gw_slots_waiter *w;
    bool took = false;

    GW_ASSERT(g->n < GW_SLOTS_WAIT_MAX);
    w = &g->waiters[g->n];
    w->slots = s;
    w->group = g;
    w->index = index;
    w->next = w->prev = NULL;
    w->queued = false;
    slots_lock(s);
    if (!s->head && slots_has_room(s)) {
        int expect = SW_WAITING;

        /* ACQ_REL: races with a grant on one of our other candidates; only one wins. */
        if (__atomic_compare_exchange_n(&g->state, &expect, SW_WON, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            g->won = index; /* read only by our own thread, in gw_slots_wait_cancel */
            s->in_use++;
            took = true;
        }
    } else if (__atomic_load_n(&g->state, __ATOMIC_RELAXED) == SW_WAITING) {
        /* RELAXED: a stale answer is harmless; a waiter queued just after the group won
         * elsewhere is dropped by the next grant here or by gw_slots_wait_cancel. */
        fifo_push(s, w);
        g->n++;
    }
    slots_unlock(s);
    return took;
}

bool
gw_slots_wait_cancel(struct gw_slots_wait *g, unsigned *index)
{
    int st = SW_WAITING;
    bool won;
    unsigned i;

    /* ACQ_REL on success, ACQUIRE on failure: a failure that reads WON pairs with
     * slots_notify's RELEASE store, so the grant's writes to <g> happen before ours. */
    if (__atomic_compare_exchange_n(&g->state, &st, SW_CANCELLED, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        won = false;
    } else {
        /* A grant won the race and is running its fn on another thread: wait for it
         * (a ring push and a wake-up) so that it is done touching <g>. ACQUIRE pairs
         * with slots_notify's RELEASE store of WON. */
        while (st == SW_GRANTING) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            st = __atomic_load_n(&g->state, __ATOMIC_ACQUIRE);
        }
        GW_ASSERT(st == SW_WON); /* DONE or CANCELLED: cancelled twice or never started */
        won = true;
    }
    /* No grant can pick this group any more; take its (now stale) waiters out, one
     * lock at a time. After the last unlock no other thread reaches <g>. */
    for (i = 0; i < g->n; i++) {
        struct gw_slots_waiter *w = &g->waiters[i];
        struct gw_slots *s = w->slots;

        slots_lock(s);
        if (w->queued)
            fifo_remove(s, w);
        slots_unlock(s);
    }
    if (won && index)
        *index = g->won;
    /* RELAXED: only this thread reads it again (a second cancel asserts). */
    __atomic_store_n(&g->state, SW_DONE, __ATOMIC_RELAXED);
    return won;
}
