/* SPDX-License-Identifier: MIT
 * net/rezone.c - the calendar watch and the rezone thread (see net/rezone.h).
 * Main's timer compares the periods of each second with those of the last one; a start
 * that is neither the same nor the last period's end means the zone moved. It then
 * drops every thread's calendar cache (net_calendar_moved) and hands the new periods to
 * the rezone thread (mu/cv; a newer hand-over replaces one not yet taken). That thread
 * waits for the store writer to commit what was settled before (store_sync), then, key
 * by key, reads the key's rows since the earliest period start into a recount and
 * installs it; gw_keylimits_recount_apply refuses a recount whose periods are no longer
 * current, and the pass starts again for the periods of the moment.
 * Owns:    the timer event, the thread, mu/cv and the hand-over slot.
 * Threads: the timer on main; pass() on the rezone thread; the slot under mu.
 * See:     net/rezone.h
 */
#include "net/rezone.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include <event2/event.h>

#include "core/alloc.h"
#include "core/log.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "store/store.h"

#define REZONE_TICK_MS 1000
#define REZONE_SYNC_MS 5000 /* longest wait for the store writer before reading anyway */
#define REZONE_PASSES 5     /* passes for one hand-over when periods keep moving */

struct net_rezone {
    struct gw_keylimits_reg *reg;
    struct store *store;
    struct event *tick;
    struct gw_period last; /* main: the periods seen at the last tick */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pending, stop;    /* under mu */
    struct gw_period want; /* under mu: the periods to recount for */
};

/* True when a start of <now> is neither <was>'s start nor its end: not the same period
 * and not the next one, so the zone moved (or the clock jumped by a period). */
static bool
moved(const struct gw_period *was, const struct gw_period *now)
{
    const struct gw_period_span *a[3] = {&was->day, &was->week, &was->month};
    const struct gw_period_span *b[3] = {&now->day, &now->week, &now->month};

    for (unsigned i = 0; i < 3; i++)
        if (b[i]->start_ms != a[i]->start_ms && b[i]->start_ms != a[i]->end_ms)
            return true;
    return false;
}

static uint64_t
earliest_start(const struct gw_period *cal)
{
    uint64_t t = cal->day.start_ms;

    if (cal->week.start_ms < t)
        t = cal->week.start_ms;
    if (cal->month.start_ms < t)
        t = cal->month.start_ms;
    return t;
}

/* ---- the rezone thread ---- */

struct pass {
    struct net_rezone *z;
    struct gw_period cal;
    size_t keys, stale;
};

static int
on_row(void *arg, const struct gw_row *row)
{
    gw_keylimits_recount_add(arg, row);
    return 0;
}

static void
recount_key(void *arg, struct gw_keylimits *k)
{
    struct pass *p = arg;
    struct gw_keylimits_recount rc;

    gw_keylimits_recount_init(&rc, &p->cal);
    store_rows_by_client(p->z->store, gw_keylimits_name(k), earliest_start(&p->cal), on_row, &rc);
    if (gw_keylimits_recount_apply(k, &rc, net_now_ms()))
        p->keys++;
    else
        p->stale++;
}

/* Recounts every key for <cal>; when some recount was stale, again for the periods of
 * the moment, at most REZONE_PASSES times. */
static void
pass(struct net_rezone *z, const struct gw_period *cal)
{
    struct pass p = {.z = z, .cal = *cal};
    uint64_t t0 = net_now_ms();

    if (!store_sync(z->store, REZONE_SYNC_MS))
        GW_LOG(GW_LOG_WARN, NULL, "store_slow",
               "the store writer did not catch up within %u ms; recounting what is committed",
               REZONE_SYNC_MS);
    for (unsigned n = 0; n < REZONE_PASSES; n++) {
        p.keys = p.stale = 0;
        gw_keylimits_reg_each(z->reg, recount_key, &p);
        if (p.stale == 0)
            break;
        net_calendar_fresh(net_now_ms(), &p.cal);
    }
    if (p.stale == 0)
        GW_LOG(GW_LOG_INFO, NULL, "key_totals_recounted",
               "the local calendar moved: day, week and month totals of %zu keys read again "
               "from the store in %llu ms",
               p.keys, (unsigned long long)(net_now_ms() - t0));
    else
        GW_LOG(GW_LOG_WARN, NULL, "key_totals_stale",
               "the local calendar kept moving: %zu keys keep their running totals", p.stale);
}

static void *
rezone_main(void *arg)
{
    struct net_rezone *z = arg;
    struct gw_period cal;

    pthread_setname_np(pthread_self(), "gw-rezone");
    for (;;) {
        pthread_mutex_lock(&z->mu);
        while (!z->pending && !z->stop)
            pthread_cond_wait(&z->cv, &z->mu);
        if (z->stop) {
            pthread_mutex_unlock(&z->mu);
            return NULL;
        }
        cal = z->want;
        z->pending = false;
        pthread_mutex_unlock(&z->mu);
        pass(z, &cal);
    }
}

/* ---- the watch on main ---- */

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_rezone *z = arg;
    struct gw_period now;

    (void)fd;
    (void)what;
    net_calendar_fresh(net_now_ms(), &now);
    if (moved(&z->last, &now)) {
        GW_LOG(GW_LOG_INFO, NULL, "calendar_moved",
               "the local day now starts at %llu ms (was %llu): recounting key totals",
               (unsigned long long)now.day.start_ms, (unsigned long long)z->last.day.start_ms);
        net_calendar_moved();
        pthread_mutex_lock(&z->mu);
        z->want = now;
        z->pending = true;
        pthread_cond_signal(&z->cv);
        pthread_mutex_unlock(&z->mu);
    }
    z->last = now;
}

enum gw_code
net_rezone_start(struct event_base *base, struct gw_keylimits_reg *reg, struct store *store,
                 struct net_rezone **out)
{
    struct net_rezone *z = gw_calloc(1, sizeof(*z));
    const struct timeval every = {REZONE_TICK_MS / 1000, (REZONE_TICK_MS % 1000) * 1000};
    sigset_t all, old;
    int rc;

    *out = NULL;
    if (!z)
        return GW_E_NOMEM;
    z->reg = reg;
    z->store = store;
    net_calendar_fresh(net_now_ms(), &z->last);
    pthread_mutex_init(&z->mu, NULL);
    pthread_cond_init(&z->cv, NULL);
    /* Signals belong to main: the thread starts with all of them blocked. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&z->thread, NULL, rezone_main, z);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&z->cv);
        pthread_mutex_destroy(&z->mu);
        gw_free(z);
        return GW_E_INTERNAL;
    }
    z->tick = event_new(base, -1, EV_PERSIST, on_tick, z);
    if (!z->tick || event_add(z->tick, &every) != 0) {
        net_rezone_stop(z);
        return GW_E_NOMEM;
    }
    *out = z;
    return GW_OK;
}

void
net_rezone_stop(struct net_rezone *z)
{
    if (!z)
        return;
    if (z->tick)
        event_free(z->tick);
    pthread_mutex_lock(&z->mu);
    z->stop = true;
    pthread_cond_signal(&z->cv);
    pthread_mutex_unlock(&z->mu);
    pthread_join(z->thread, NULL);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    gw_free(z);
}
