/* SPDX-License-Identifier: MIT
 * core/slots.h - admission semaphores (DESIGN.md 7, 18): counting semaphores with FIFO
 * waiters that are woken across threads. One gw_slots backs an upstream's
 * `providers[].max_concurrent` (its slots) and one a key's `clients[].max_concurrent` (its
 * permit). A request that finds every remaining candidate full waits on all of them at
 * once through one gw_slots_wait group: the first slot to free wins, the group's other
 * waiters become stale and never hold a slot.
 * Pure: no I/O, no clock, no libevent; deadlines are the caller's business. Waiting is
 * not a failure: nothing here touches health.
 * Owns:    a registry owns its gw_slots (one per name for the life of the process, so
 *          in-flight counts survive reloads); the caller owns each gw_slots_wait
 *          (embedded in the waiting request) and the slots it took or won.
 * Threads: try/release/resize/stats/wait_* on any thread (one tiny spinlock per
 *          gw_slots, held for a few instructions, never across a callback or an
 *          allocation); a group is driven by one thread at a time (its owner's worker);
 *          registry calls on main only.
 * See:     core/slots.c, tests/unit/core/test_slots.c
 *
 * Lifecycle of a wait, as the net layer uses it:
 *
 *     if (gw_slots_try(s))                      -> slot taken, send the hop
 *     gw_slots_wait_init(&r->wait, r, worker_id);
 *     for each full candidate i, in candidate order:
 *         if (gw_slots_wait_add(&r->wait, slots_of(i), i)) break;   -> won i right now
 *     ... later, on the grant message (posted by <fn>) or at the deadline / client gone:
 *     if (gw_slots_wait_cancel(&r->wait, &i))   -> the slot of candidate i is ours
 *     else                                      -> nothing won: 429 gw.busy_all
 *
 * Every group that was initialised ends with exactly one gw_slots_wait_cancel, whatever
 * happened; only after it returns may the group be freed or initialised again.
 */
#ifndef GW_CORE_SLOTS_H
#define GW_CORE_SLOTS_H

#include <stdbool.h>
#include <stddef.h>

#define GW_SLOTS_WAIT_MAX 16 /* waiters per group: one per candidate */

struct gw_slots;
struct gw_slots_reg;
struct gw_slots_wait;

/* Called when group <g> has won a slot on its candidate <index> (the slot is now the
 * group's: in_use already counts it). Runs outside every lock, on the thread that freed
 * the slot (gw_slots_release) or raised the limit (gw_slots_resize), which may be any
 * thread. The net layer posts a message to <g>->worker and wakes it. It must not block
 * and must not call gw_slots_wait_cancel on <g> (the owner's cancel waits for it to
 * return); it may read <g>->owner and <g>->worker. <ctx> is the releaser's argument. */
typedef void (*gw_slots_grant_fn)(void *ctx, struct gw_slots_wait *g, unsigned index);

/* One waiter: the group's entry in one gw_slots' FIFO. Layout public only so that a
 * group can be embedded; every field is private to core/slots.c. */
struct gw_slots_waiter {
    struct gw_slots_waiter *next, *prev; /* FIFO links; guarded by <slots>' lock */
    struct gw_slots *slots;              /* the semaphore waited on */
    struct gw_slots_wait *group;         /* the group this waiter belongs to */
    unsigned index;                      /* candidate index, passed to the grant fn */
    bool queued;                         /* in <slots>' FIFO; guarded by its lock */
};

/* A request's wait on up to GW_SLOTS_WAIT_MAX semaphores; embedded in the request,
 * which must keep it alive (and in place) from gw_slots_wait_init until
 * gw_slots_wait_cancel returns. <owner> and <worker> are the caller's, for the grant fn;
 * the rest is private to core/slots.c. */
struct gw_slots_wait {
    void *owner;     /* the waiting request */
    unsigned worker; /* which worker thread to wake */
    int state;       /* atomic: the single "won" flag and its phases (core/slots.c) */
    unsigned won;    /* the candidate index won; valid once state says so */
    unsigned n;      /* waiters[0..n) in use */
    struct gw_slots_waiter waiters[GW_SLOTS_WAIT_MAX];
};

/* ---- registry (main thread) ---- */

/* A registry of semaphores by name (one for providers, one for clients). NULL when out
 * of memory. Main thread. */
struct gw_slots_reg *gw_slots_reg_new(void);

/* Frees the registry and every gw_slots in it (NULL is fine). At exit, when no thread
 * uses them and no group waits on them any more. */
void gw_slots_reg_free(struct gw_slots_reg *r);

/* The semaphore named <name>, created on first use with no limit (max 0); the same
 * object for the life of the registry, so a reload keeps its in-flight count and its
 * waiters (set the new limit with gw_slots_resize). NULL when out of memory. Main
 * thread only; the pointer may then be handed to any thread (e.g. through a snapshot). */
struct gw_slots *gw_slots_reg_get(struct gw_slots_reg *r, const char *name);

/* The <i>th semaphore of <r> (i < gw_slots_reg_count), in creation order, and how many
 * there are: for a reload to find those its config no longer names. Main thread. */
size_t gw_slots_reg_count(const struct gw_slots_reg *r);
struct gw_slots *gw_slots_reg_at(const struct gw_slots_reg *r, size_t i);

/* The name <s> was created with. Any thread (immutable). */
const char *gw_slots_name(const struct gw_slots *s);

/* ---- slots (any thread) ---- */

/* Takes a slot of <s> when one is free (in_use < max, or max is 0) and no waiter is
 * queued (FIFO fairness: a freed slot goes to the waiters first). Returns true when it
 * took one: the caller owns it and gives it back with gw_slots_release. Never blocks. */
bool gw_slots_try(struct gw_slots *s);

/* Gives one slot of <s> back (the caller owned it: from gw_slots_try, a true
 * gw_slots_wait_add or gw_slots_wait_cancel). When a waiter is queued and the limit
 * allows it, the slot passes straight to the first waiter whose group has not yet won
 * (in_use unchanged): that group is marked won and <fn>(<ctx>, group, index) is called on
 * this thread after the lock is dropped. Waiters whose group already won elsewhere or
 * gave up are dropped on the way, so their slot is never leaked. Otherwise in_use goes
 * down by one. Any thread; never blocks (the lock is held for a few instructions). */
void gw_slots_release(struct gw_slots *s, gw_slots_grant_fn fn, void *ctx);

/* Sets the limit of <s> to <max> (a reload; 0 = no limit). Raising it, or removing it,
 * grants queued waiters at once, in FIFO order, calling <fn>(<ctx>, group, index) for
 * each after the lock is dropped. Lowering it takes nothing back: in_use may exceed max
 * until releases bring it down, and no waiter is granted meanwhile. Any thread. */
void gw_slots_resize(struct gw_slots *s, unsigned max, gw_slots_grant_fn fn, void *ctx);

/* The limit (0 = none), slots held, and waiters queued on <s>. <waiting> may for a
 * moment include waiters whose group already won another candidate and whose owner has
 * not yet called gw_slots_wait_cancel. Any NULL pointer is skipped. Any thread. */
void gw_slots_stats(struct gw_slots *s, unsigned *max, unsigned *in_use, unsigned *waiting);

/* ---- waiting on several semaphores (the group's owner thread) ---- */

/* Starts group <g> (caller memory; any previous wait on it must have been ended with
 * gw_slots_wait_cancel) for request <owner> on worker <worker>; no waiter yet. */
void gw_slots_wait_init(struct gw_slots_wait *g, void *owner, unsigned worker);

/* Registers group <g> on <s> as candidate <index> (add candidates in candidate order).
 * When <s> has a free slot and nobody is queued (the caller's gw_slots_try may have lost
 * a race with a release), the slot is taken for the group at once: returns true, the
 * group has won <index>, no grant fn will be called for it, and the caller should add no
 * more candidates (the win is confirmed, with the other waiters removed, by
 * gw_slots_wait_cancel). Otherwise the group is queued at the tail of <s>' FIFO and
 * false is returned; false is also returned, without queueing, when the group has
 * already won (a grant raced with this call). At most GW_SLOTS_WAIT_MAX adds per group
 * (more is a bug: asserted). Never blocks. */
bool gw_slots_wait_add(struct gw_slots_wait *g, struct gw_slots *s, unsigned index);

/* Ends group <g>: removes all its waiters from every FIFO. Call it exactly once per
 * gw_slots_wait_init: when the grant message arrives, or when the request gives up
 * (deadline passed, client gone). Returns true when the group won a slot (from a grant,
 * or from gw_slots_wait_add): the caller then owns the slot of candidate <*index> (when
 * <index> is not NULL) and must use it or gw_slots_release it. Returns false when it won
 * nothing: no slot can be granted to it any more. Race-free against a grant on another
 * thread: exactly one of the two takes the slot. When a grant won the race, this call
 * waits (spinning) until that grant's fn has returned, so when it returns true the fn
 * has run and whatever it posted is already on its way to the worker: a caller that
 * gave up must expect that message (e.g. keep the request alive, or reference-count it,
 * until it arrives). After it returns, <g> may be freed or initialised again. */
bool gw_slots_wait_cancel(struct gw_slots_wait *g, unsigned *index);

#endif
