/* SPDX-License-Identifier: MIT
 * core/limits.c - per-key usage limits: totals per period, admission with reservations,
 * settlement, rebuild from rows, alerts, views (semantics in core/limits.h).
 * Each key keeps one total per calendar period (day, week, month) and one rolling ring
 * per window (minute, hour). A ring holds one bucket per second that saw usage, sorted
 * by second, plus the running sum of its buckets; it grows by doubling up to one bucket
 * per second of its window (60, 3600), so an idle key costs almost nothing and the time
 * at which usage leaves a window is exact to the second. Totals count every measure
 * whatever the configured entries, so entries can change without a rebuild.
 * A calendar period carries a generation, bumped whenever its total starts over
 * (rollover, reset); a reservation remembers the generation and the bucket second it
 * was counted in, so its settlement touches exactly what it counted, or nothing.
 * Locks: one test-and-test-and-set spinlock per key, written with GCC __atomic builtins
 * (exchange ACQUIRE to take, store RELEASE to drop) like core/sticky.c, because
 * ck_spinlock's volatile loads are invisible to ThreadSanitizer. A ring that must grow
 * is grown outside the lock (drop, allocate, retake, install if still smaller); an
 * allocation that fails merges the usage into a neighbouring bucket instead.
 * The registry is a fixed hash of singly linked keys: a key is published with a RELEASE
 * store of its chain head and never unlinked, so lookups take no lock.
 * Owns:    the registry owns its keys; a key owns its ring arrays.
 * Threads: any; see core/limits.h.
 * See:     core/limits.h, tests/unit/core/test_limits.c
 */
#include "core/limits.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/spin.h"

#define KL_REG_BUCKETS 64 /* registry hash chains (power of two) */
#define KL_ROLLS 2        /* minute, hour: indexed by enum gw_limit_per */
#define KL_CALS 3         /* day, week, month: indexed by per - GW_LIMIT_DAY */
#define KL_ROLL_INLINE 8  /* buckets held inside the key before a ring allocates */

/* Usage of one bucket, one period or one window: every measure. */
struct kl_total {
    uint64_t requests;
    uint64_t tokens;      /* uncached input + cache writes + output */
    uint64_t cache_reads; /* added for entries with cache_reads */
    uint64_t cost;        /* micro-dollars */
};

struct kl_bucket {
    uint64_t sec; /* second since the epoch */
    struct kl_total t;
};

/* A rolling window: buckets sorted by sec, logical index i at b[(head + i) % cap]. */
struct kl_roll {
    uint32_t window_s; /* 60 or 3600 */
    uint32_t max_cap;  /* = window_s: live seconds are distinct and inside the window */
    uint32_t cap, head, n;
    uint64_t now_sec;    /* the latest second seen; buckets with sec + window_s <= it left */
    struct kl_total sum; /* of the buckets */
    struct kl_bucket *b; /* inline, or allocated when it grew */
    struct kl_bucket inline_b[KL_ROLL_INLINE];
};

/* A calendar period: [start_ms, end_ms); end_ms 0 while not known (fresh key, or the
 * period ended before the caller passed the next one). */
struct kl_cal {
    uint64_t start_ms, end_ms;
    uint32_t gen;         /* bumped when the total starts over */
    struct kl_total t;    /* everything counted, reservations included */
    struct kl_total held; /* the part of t that running requests reserved (not settled) */
};

/* A configured entry and its alert state (level 0: 80%, level 1: 100%). */
struct kl_entry {
    enum gw_limit_per per;
    enum gw_limit_measure measure;
    bool cache_reads;
    uint64_t max;
    uint32_t fired_gen[2]; /* calendar: gen + 1 of the period it fired in; 0 never */
    bool fired[2];         /* rolling: fired at fired_ms (re-arms a window later) */
    uint64_t fired_ms[2];
};

struct gw_keylimits {
    struct gw_spin lock;       /* only through kl_lock/kl_unlock */
    struct gw_keylimits *next; /* registry chain; immutable once published */
    char name[GW_NAME_MAX + 1];
    struct kl_entry e[GW_KEYLIMITS_MAX_ENTRIES];
    size_t n;
    struct kl_roll roll[KL_ROLLS];
    struct kl_cal cal[KL_CALS];
    struct gw_limit_alert alerts[GW_KEYLIMITS_MAX_ALERTS]; /* queue */
    size_t a_head, a_n;
    size_t a_pending;   /* = a_n, read without the lock by has_alerts */
    uint64_t a_dropped; /* read without the lock by alerts_dropped */
    char unpriced[GW_KEYLIMITS_MAX_UNPRICED][GW_MODEL_MAX + 1]; /* models costed at $0 */
    size_t n_unpriced;
};

struct gw_keylimits_reg {
    struct gw_spin lock; /* serialises insertions; lookups take none */
    struct gw_keylimits *heads[KL_REG_BUCKETS];
};

/* ---- locks ---- */

static void
kl_lock(struct gw_keylimits *k)
{
    gw_spin_lock(&k->lock);
}

static void
kl_unlock(struct gw_keylimits *k)
{
    gw_spin_unlock(&k->lock);
}

/* ---- totals ---- */

static uint64_t
kl_sub_sat(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static uint64_t
kl_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void
kl_total_add(struct kl_total *t, const struct kl_total *d)
{
    t->requests = kl_add_sat(t->requests, d->requests);
    t->tokens = kl_add_sat(t->tokens, d->tokens);
    t->cache_reads = kl_add_sat(t->cache_reads, d->cache_reads);
    t->cost = kl_add_sat(t->cost, d->cost);
}

static void
kl_total_sub(struct kl_total *t, const struct kl_total *d)
{
    t->requests = kl_sub_sat(t->requests, d->requests);
    t->tokens = kl_sub_sat(t->tokens, d->tokens);
    t->cache_reads = kl_sub_sat(t->cache_reads, d->cache_reads);
    t->cost = kl_sub_sat(t->cost, d->cost);
}

/* <t> less <minus>, then plus <plus>, each saturating: a settlement in one pass. */
static void
kl_total_settle(struct kl_total *t, const struct kl_total *minus, const struct kl_total *plus)
{
    t->requests = kl_add_sat(kl_sub_sat(t->requests, minus->requests), plus->requests);
    t->tokens = kl_add_sat(kl_sub_sat(t->tokens, minus->tokens), plus->tokens);
    t->cache_reads = kl_add_sat(kl_sub_sat(t->cache_reads, minus->cache_reads), plus->cache_reads);
    t->cost = kl_add_sat(kl_sub_sat(t->cost, minus->cost), plus->cost);
}

static uint64_t
kl_measure(const struct kl_total *t, enum gw_limit_measure m, bool cache_reads)
{
    switch (m) {
    case GW_LIMIT_REQUESTS: return t->requests;
    case GW_LIMIT_TOKENS: return cache_reads ? kl_add_sat(t->tokens, t->cache_reads) : t->tokens;
    case GW_LIMIT_COST: return t->cost;
    }
    return 0;
}

/* The usage of a finished request: 1 request, its tokens, its cost. */
static struct kl_total
kl_usage_total(const struct gw_usage *u, int64_t cost_micros)
{
    struct kl_total t = {.requests = 1, .cost = cost_micros > 0 ? (uint64_t)cost_micros : 0};

    if (u) {
        t.tokens = kl_add_sat(kl_add_sat(u->input_tokens, u->cache_write_tokens), u->output_tokens);
        t.cache_reads = u->cache_read_tokens;
    }
    return t;
}

/* ---- rolling windows ---- */

static struct kl_bucket *
kl_roll_at(const struct kl_roll *r, uint32_t i)
{
    uint32_t at = r->head + i; /* head and i are below cap: no division */

    return &r->b[at < r->cap ? at : at - r->cap];
}

/* Moves the window's end to <sec> when it is later and drops the buckets that left. */
static void
kl_roll_advance(struct kl_roll *r, uint64_t sec)
{
    if (sec > r->now_sec)
        r->now_sec = sec;
    while (r->n > 0) {
        struct kl_bucket *b = kl_roll_at(r, 0);

        if (b->sec + r->window_s > r->now_sec)
            break;
        kl_total_sub(&r->sum, &b->t);
        r->head = r->head + 1 < r->cap ? r->head + 1 : 0;
        r->n--;
    }
    if (r->n == 0)
        r->sum = (struct kl_total){0}; /* exact again after any saturation */
}

/* True when usage at <sec> is still inside the window. */
static bool
kl_roll_alive(const struct kl_roll *r, uint64_t sec)
{
    return sec + r->window_s > r->now_sec;
}

/* The logical index of the bucket of <sec>, or -1. The newest bucket first: nearly
 * every admission and settlement is in the current second. */
static long
kl_roll_find(const struct kl_roll *r, uint64_t sec)
{
    uint32_t lo = 0, hi = r->n;

    if (hi == 0)
        return -1;
    if (kl_roll_at(r, hi - 1)->sec <= sec)
        return kl_roll_at(r, hi - 1)->sec == sec ? (long)(hi - 1) : -1;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t s = kl_roll_at(r, mid)->sec;

        if (s == sec)
            return (long)mid;
        if (s < sec)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* True when counting at <sec> needs a new bucket and the ring is full but may grow. */
static bool
kl_roll_wants_room(const struct kl_roll *r, uint64_t sec)
{
    return kl_roll_alive(r, sec) && r->n == r->cap && r->cap < r->max_cap &&
           kl_roll_find(r, sec) < 0;
}

/* The bucket to count usage at <sec> in (alive), created when needed; its second goes to
 * <*where>. Without room (an allocation failed) the first later bucket takes it (it
 * then counts a little longer), else the latest. Never NULL: a full ring has buckets. */
static struct kl_bucket *
kl_roll_bucket(struct kl_roll *r, uint64_t sec, uint64_t *where)
{
    long found = kl_roll_find(r, sec);
    struct kl_bucket *b;
    uint32_t pos, j;

    if (found >= 0) {
        *where = sec;
        return kl_roll_at(r, (uint32_t)found);
    }
    if (r->n < r->cap) {
        pos = r->n;
        while (pos > 0 && kl_roll_at(r, pos - 1)->sec > sec)
            pos--;
        for (j = r->n; j > pos; j--)
            *kl_roll_at(r, j) = *kl_roll_at(r, j - 1);
        r->n++;
        b = kl_roll_at(r, pos);
        memset(b, 0, sizeof(*b));
        b->sec = sec;
        *where = sec;
        return b;
    }
    for (j = 0; j < r->n; j++) {
        b = kl_roll_at(r, j);
        if (b->sec > sec) {
            *where = b->sec;
            return b;
        }
    }
    b = kl_roll_at(r, r->n - 1);
    *where = b->sec;
    return b;
}

/* Copies the buckets of <r> into <nb> (<cap> of them, > r->n) and installs it; returns
 * the old array for the caller to free after unlocking (NULL for the inline one). */
static struct kl_bucket *
kl_roll_install(struct kl_roll *r, struct kl_bucket *nb, uint32_t cap)
{
    struct kl_bucket *old = r->b == r->inline_b ? NULL : r->b;

    for (uint32_t i = 0; i < r->n; i++)
        nb[i] = *kl_roll_at(r, i);
    r->b = nb;
    r->cap = cap;
    r->head = 0;
    return old;
}

/* When the oldest usage of measure <m> still counted leaves the window; <now_ms> when
 * none is counted. */
static uint64_t
kl_roll_resets_at(const struct kl_roll *r, enum gw_limit_measure m, bool cache_reads,
                  uint64_t now_ms)
{
    for (uint32_t i = 0; i < r->n; i++) {
        const struct kl_bucket *b = kl_roll_at(r, i);

        if (kl_measure(&b->t, m, cache_reads) > 0)
            return (b->sec + r->window_s) * 1000;
    }
    return now_ms;
}

/* ---- calendar periods ---- */

static const struct gw_period_span *
kl_span(const struct gw_period *cal, unsigned i)
{
    return i == 0 ? &cal->day : i == 1 ? &cal->week : &cal->month;
}

static void
kl_cal_restart(struct kl_cal *c)
{
    c->t = (struct kl_total){0};
    c->held = (struct kl_total){0};
    c->gen++;
}

/* A period whose end has passed at <now_ms> starts over; the next one's end is not
 * known until the caller passes it (its start is the old end). */
static void
kl_cal_expire(struct kl_cal *c, uint64_t now_ms)
{
    if (c->end_ms != 0 && now_ms >= c->end_ms) {
        kl_cal_restart(c);
        c->start_ms = c->end_ms;
        c->end_ms = 0;
    }
}

/* Adopts the caller's period <s>: the same start keeps the total (the end may move by a
 * DST hour); a start at or after the known end is a new period (from zero); a period
 * wholly before ours is a stale view from a racing thread and is ignored; anything
 * else is a moved start (time-zone change) whose total the caller rebuilds. */
static void
kl_cal_sync(struct kl_cal *c, const struct gw_period_span *s)
{
    if (s->end_ms <= s->start_ms)
        return; /* not a period */
    if (s->start_ms == c->start_ms) {
        c->end_ms = s->end_ms;
        return;
    }
    if (c->end_ms != 0 && s->start_ms >= c->end_ms)
        kl_cal_restart(c);
    else if (s->end_ms <= c->start_ms)
        return;
    c->start_ms = s->start_ms;
    c->end_ms = s->end_ms;
}

/* ---- key state ---- */

/* Brings <k> to <now_ms> and, when given, the caller's periods <cal>. Lock held. */
static void
kl_advance(struct gw_keylimits *k, uint64_t now_ms, const struct gw_period *cal)
{
    for (unsigned i = 0; i < KL_ROLLS; i++)
        kl_roll_advance(&k->roll[i], now_ms / 1000);
    for (unsigned i = 0; i < KL_CALS; i++) {
        kl_cal_expire(&k->cal[i], now_ms);
        if (cal)
            kl_cal_sync(&k->cal[i], kl_span(cal, i));
    }
}

/* Lock held; may drop and retake it. When ring i must take a new bucket at <sec>[i] and is
 * full, allocates a bigger array outside the lock and installs it if the ring is still
 * smaller; arrays to free after unlocking go to <old>. State may change meanwhile: the
 * caller decides only after this returns. True when the lock was dropped. */
static bool
kl_make_room(struct gw_keylimits *k, const uint64_t sec[KL_ROLLS], struct kl_bucket *old[KL_ROLLS])
{
    uint32_t want[KL_ROLLS] = {0};
    struct kl_bucket *nb[KL_ROLLS] = {NULL};
    bool any = false;

    for (unsigned i = 0; i < KL_ROLLS; i++) {
        struct kl_roll *r = &k->roll[i];

        if (kl_roll_wants_room(r, sec[i])) {
            uint32_t c = r->cap * 2;

            want[i] = c < r->max_cap ? c : r->max_cap;
            any = true;
        }
    }
    if (!any)
        return false;
    kl_unlock(k);
    for (unsigned i = 0; i < KL_ROLLS; i++)
        if (want[i])
            nb[i] = gw_malloc(want[i] * sizeof(struct kl_bucket));
    kl_lock(k);
    for (unsigned i = 0; i < KL_ROLLS; i++) {
        if (!nb[i])
            continue;
        if (k->roll[i].cap < want[i])
            old[i] = kl_roll_install(&k->roll[i], nb[i], want[i]);
        else
            old[i] = nb[i]; /* another thread grew it meanwhile */
    }
    return true;
}

static const struct kl_total *
kl_entry_total(const struct gw_keylimits *k, const struct kl_entry *e)
{
    if (gw_limit_per_is_rolling(e->per))
        return &k->roll[e->per].sum;
    return &k->cal[e->per - GW_LIMIT_DAY].t;
}

static uint64_t
kl_used(const struct gw_keylimits *k, const struct kl_entry *e)
{
    return kl_measure(kl_entry_total(k, e), e->measure, e->cache_reads);
}

static uint64_t
kl_resets_at(const struct gw_keylimits *k, const struct kl_entry *e, uint64_t now_ms)
{
    if (gw_limit_per_is_rolling(e->per))
        return kl_roll_resets_at(&k->roll[e->per], e->measure, e->cache_reads, now_ms);
    return k->cal[e->per - GW_LIMIT_DAY].end_ms;
}

/* Whether usage <used> plus the request's <need> fits <max> (an empty period always
 * takes one request). */
static bool
kl_fits(uint64_t used, uint64_t need, uint64_t max)
{
    return used == 0 || (need <= max && used <= max - need);
}

/* ---- alerts ---- */

static void
kl_alert_push(struct gw_keylimits *k, const struct kl_entry *e, unsigned percent, uint64_t used,
              uint64_t now_ms)
{
    struct gw_limit_alert *a;

    if (k->a_n == GW_KEYLIMITS_MAX_ALERTS) {
        /* RELAXED: a statistic; the lock orders it against other writers. */
        __atomic_store_n(&k->a_dropped, k->a_dropped + 1, __ATOMIC_RELAXED);
        return;
    }
    a = &k->alerts[(k->a_head + k->a_n) % GW_KEYLIMITS_MAX_ALERTS];
    memset(a, 0, sizeof(*a));
    memcpy(a->client, k->name, sizeof(a->client));
    a->per = e->per;
    a->measure = e->measure;
    a->percent = percent;
    a->used = used;
    a->max = e->max;
    a->resets_at_ms = kl_resets_at(k, e, now_ms);
    a->at_ms = now_ms;
    k->a_n++;
    /* RELAXED: has_alerts is a hint; take_alerts reads the queue under the lock. */
    __atomic_store_n(&k->a_pending, k->a_n, __ATOMIC_RELAXED);
}

/* True when level <l> of <e> was already announced in the current period. */
static bool
kl_fired(const struct gw_keylimits *k, const struct kl_entry *e, unsigned l, uint64_t now_ms)
{
    if (gw_limit_per_is_rolling(e->per))
        return e->fired[l] && now_ms < e->fired_ms[l] + (uint64_t)k->roll[e->per].window_s * 1000;
    return e->fired_gen[l] == k->cal[e->per - GW_LIMIT_DAY].gen + 1;
}

static void
kl_mark_fired(const struct gw_keylimits *k, struct kl_entry *e, unsigned l, uint64_t now_ms)
{
    if (gw_limit_per_is_rolling(e->per)) {
        e->fired[l] = true;
        e->fired_ms[l] = now_ms;
    } else {
        e->fired_gen[l] = k->cal[e->per - GW_LIMIT_DAY].gen + 1;
    }
}

/* Announces (or, <silent>, only marks) every threshold reached and not yet announced in
 * its period. Lock held. */
static void
kl_check_alerts(struct gw_keylimits *k, uint64_t now_ms, bool silent)
{
    for (size_t i = 0; i < k->n; i++) {
        struct kl_entry *e = &k->e[i];
        uint64_t used = kl_used(k, e);
        uint64_t th[2] = {e->max - e->max / 5, e->max};
        static const unsigned pct[2] = {80, 100};

        for (unsigned l = 0; l < 2; l++) {
            if (used < th[l] || kl_fired(k, e, l, now_ms))
                continue;
            kl_mark_fired(k, e, l, now_ms);
            if (!silent)
                kl_alert_push(k, e, pct[l], used, now_ms);
        }
    }
}

/* <e> stopped a request: its 100% alert, once per period (80% is then implied). */
static void
kl_alert_stopped(struct gw_keylimits *k, struct kl_entry *e, uint64_t now_ms)
{
    if (kl_fired(k, e, 1, now_ms))
        return;
    kl_mark_fired(k, e, 0, now_ms);
    kl_mark_fired(k, e, 1, now_ms);
    kl_alert_push(k, e, 100, kl_used(k, e), now_ms);
}

/* ---- registry ---- */

static size_t
kl_hash(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h & (KL_REG_BUCKETS - 1);
}

struct gw_keylimits_reg *
gw_keylimits_reg_new(void)
{
    return gw_calloc(1, sizeof(struct gw_keylimits_reg));
}

void
gw_keylimits_reg_free(struct gw_keylimits_reg *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < KL_REG_BUCKETS; i++) {
        struct gw_keylimits *k = reg->heads[i], *next;

        for (; k; k = next) {
            next = k->next;
            for (unsigned r = 0; r < KL_ROLLS; r++)
                if (k->roll[r].b != k->roll[r].inline_b)
                    gw_free(k->roll[r].b);
            gw_free(k);
        }
    }
    gw_free(reg);
}

static struct gw_keylimits *
kl_chain_find(struct gw_keylimits *const *head, const char *name)
{
    /* ACQUIRE: pairs with the RELEASE store that published the head, so the key it points
     * at (and every older key down the chain, published before it under the registry
     * lock) is fully initialised. */
    struct gw_keylimits *k = __atomic_load_n(head, __ATOMIC_ACQUIRE);

    for (; k; k = k->next)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

struct gw_keylimits *
gw_keylimits_reg_find(const struct gw_keylimits_reg *reg, const char *name)
{
    if (!name || !*name)
        return NULL;
    return kl_chain_find(&reg->heads[kl_hash(name)], name);
}

void
gw_keylimits_reg_each(const struct gw_keylimits_reg *reg,
                      void (*fn)(void *arg, struct gw_keylimits *k), void *arg)
{
    for (size_t i = 0; i < KL_REG_BUCKETS; i++) {
        /* ACQUIRE: as in kl_chain_find. */
        struct gw_keylimits *k = __atomic_load_n(&reg->heads[i], __ATOMIC_ACQUIRE);

        for (; k; k = k->next)
            fn(arg, k);
    }
}

struct gw_keylimits *
gw_keylimits_reg_get(struct gw_keylimits_reg *reg, const char *name, bool *created)
{
    struct gw_keylimits *k, *found;
    size_t len, h;

    if (created)
        *created = false;
    if (!name)
        return NULL;
    len = strnlen(name, GW_NAME_MAX + 1);
    if (len == 0 || len > GW_NAME_MAX)
        return NULL;
    h = kl_hash(name);
    found = kl_chain_find(&reg->heads[h], name);
    if (found)
        return found;

    k = gw_calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    memcpy(k->name, name, len);
    k->roll[GW_LIMIT_MINUTE].window_s = k->roll[GW_LIMIT_MINUTE].max_cap = 60;
    k->roll[GW_LIMIT_HOUR].window_s = k->roll[GW_LIMIT_HOUR].max_cap = 3600;
    for (unsigned i = 0; i < KL_ROLLS; i++) {
        k->roll[i].b = k->roll[i].inline_b;
        k->roll[i].cap = KL_ROLL_INLINE;
    }

    gw_spin_lock(&reg->lock);
    found = kl_chain_find(&reg->heads[h], name);
    if (!found) {
        k->next = reg->heads[h];
        /* RELEASE: the key's initialisation happens before a lock-free reader's ACQUIRE
         * load of the head in kl_chain_find. */
        __atomic_store_n(&reg->heads[h], k, __ATOMIC_RELEASE);
    }
    gw_spin_unlock(&reg->lock);
    if (found) {
        gw_free(k); /* another thread created it first */
        return found;
    }
    if (created)
        *created = true;
    return k;
}

const char *
gw_keylimits_name(const struct gw_keylimits *k)
{
    return k->name;
}

/* ---- configuration ---- */

enum gw_code
gw_keylimits_configure(struct gw_keylimits *k, const struct gw_conf_limit *limits, size_t n)
{
    struct kl_entry ne[GW_KEYLIMITS_MAX_ENTRIES];
    size_t nn = 0;
    enum gw_code rc = GW_OK;

    memset(ne, 0, sizeof(ne));
    for (size_t i = 0; i < n; i++) {
        const struct gw_conf_limit *l = &limits[i];
        const bool has[3] = {l->has_requests, l->has_tokens, l->has_cost};
        const uint64_t max[3] = {l->requests, l->tokens, l->cost_micros};

        if ((unsigned)l->per > GW_LIMIT_MONTH)
            continue;
        for (unsigned m = 0; m < 3; m++) {
            if (!has[m] || max[m] == 0)
                continue;
            if (nn == GW_KEYLIMITS_MAX_ENTRIES) {
                rc = GW_E_CFG_RANGE;
                continue;
            }
            ne[nn].per = l->per;
            ne[nn].measure = (enum gw_limit_measure)m;
            ne[nn].cache_reads = m == GW_LIMIT_TOKENS && l->cache_reads;
            ne[nn].max = max[m];
            nn++;
        }
    }

    kl_lock(k);
    for (size_t i = 0; i < nn; i++) {
        for (size_t j = 0; j < k->n; j++) {
            const struct kl_entry *o = &k->e[j];

            if (o->per == ne[i].per && o->measure == ne[i].measure &&
                o->cache_reads == ne[i].cache_reads && o->max == ne[i].max) {
                ne[i] = *o; /* the same limit: keep what it announced */
                break;
            }
        }
    }
    memcpy(k->e, ne, sizeof(ne));
    k->n = nn;
    kl_unlock(k);
    return rc;
}

/* ---- admission and settlement ---- */

static enum gw_code
kl_code(const struct kl_entry *e)
{
    static const enum gw_code cal[3] = {GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD,
                                        GW_E_KEY_LIMIT_TOKENS_PER_PERIOD,
                                        GW_E_KEY_LIMIT_COST_PER_PERIOD};
    static const enum gw_code roll[3] = {GW_E_KEY_LIMIT_REQUESTS_ROLLING,
                                         GW_E_KEY_LIMIT_TOKENS_ROLLING,
                                         GW_E_KEY_LIMIT_COST_ROLLING};

    return gw_limit_per_is_rolling(e->per) ? roll[e->measure] : cal[e->measure];
}

/* The instant at which rolling entry <e> would take <need>: when enough buckets have
 * left its window. Lock held; <e> does not fit now. */
static uint64_t
kl_roll_pass_at(const struct gw_keylimits *k, const struct kl_entry *e, uint64_t need,
                uint64_t now_ms)
{
    const struct kl_roll *r = &k->roll[e->per];
    uint64_t used = kl_used(k, e);

    for (uint32_t i = 0; i < r->n; i++) {
        const struct kl_bucket *b = kl_roll_at(r, i);

        used = kl_sub_sat(used, kl_measure(&b->t, e->measure, e->cache_reads));
        if (kl_fits(used, need, e->max))
            return (b->sec + r->window_s) * 1000;
    }
    return now_ms + 1000; /* not reached: the sum and its buckets always agree */
}

/* The second each ring counts a request admitted at <sec> in: <sec>, unless the clock
 * is more than a window behind the latest second the ring saw (a clock stepped back):
 * then that latest second, so the request still counts (a little longer). Lock held. */
static void
kl_admit_secs(const struct gw_keylimits *k, uint64_t sec, uint64_t out[KL_ROLLS])
{
    for (unsigned i = 0; i < KL_ROLLS; i++)
        out[i] = kl_roll_alive(&k->roll[i], sec) ? sec : k->roll[i].now_sec;
}

/* Decides for a request needing <d> at <now_ms>: calendar entries first (refuse), then,
 * with <rolling>, the rolling ones (wait). Fills <v> (may be NULL) when not admitted
 * and marks the entries that stopped it in <stopped>. Lock held; counts nothing. */
static enum gw_limit_decision
kl_decide(const struct gw_keylimits *k, uint64_t now_ms, const struct kl_total *d, bool rolling,
          bool stopped[GW_KEYLIMITS_MAX_ENTRIES], struct gw_limit_verdict *v)
{
    enum gw_limit_decision dec = GW_LIMIT_OK;
    const struct kl_entry *why = NULL;
    uint64_t why_at = 0;

    for (unsigned pass = 0; pass < (rolling ? 2u : 1u) && dec == GW_LIMIT_OK; pass++) {
        for (size_t i = 0; i < k->n; i++) {
            const struct kl_entry *e = &k->e[i];
            uint64_t need = kl_measure(d, e->measure, false), at;

            if (gw_limit_per_is_rolling(e->per) != (pass == 1))
                continue;
            if (kl_fits(kl_used(k, e), need, e->max))
                continue;
            stopped[i] = true;
            if (pass == 0) {
                at = k->cal[e->per - GW_LIMIT_DAY].end_ms;
                if (at <= now_ms)
                    at = now_ms + 1000; /* period end not known (no <cal> yet) */
            } else {
                at = kl_roll_pass_at(k, e, need, now_ms);
            }
            if (!why || at > why_at) {
                why = e;
                why_at = at;
            }
            dec = pass == 0 ? GW_LIMIT_REFUSE_CALENDAR : GW_LIMIT_WAIT_ROLLING;
        }
    }
    if (dec != GW_LIMIT_OK && v) {
        v->code = kl_code(why);
        v->per = why->per;
        v->measure = why->measure;
        v->used = kl_used(k, why);
        v->max = why->max;
        v->retry_at_ms = why_at;
        v->retry_after_ms = why_at - now_ms;
    }
    return dec;
}

static struct kl_total
kl_need(uint64_t est_tokens, int64_t est_cost_micros)
{
    struct kl_total d = {.requests = 1, .tokens = est_tokens};

    d.cost = est_cost_micros > 0 ? (uint64_t)est_cost_micros : 0;
    return d;
}

enum gw_limit_decision
gw_keylimits_check_calendar(struct gw_keylimits *k, uint64_t now_ms, const struct gw_period *cal,
                            uint64_t est_tokens, int64_t est_cost_micros,
                            struct gw_limit_verdict *v)
{
    const struct kl_total d = kl_need(est_tokens, est_cost_micros);
    bool stopped[GW_KEYLIMITS_MAX_ENTRIES] = {false};
    enum gw_limit_decision dec;

    if (v)
        memset(v, 0, sizeof(*v));
    kl_lock(k);
    kl_advance(k, now_ms, cal);
    dec = kl_decide(k, now_ms, &d, false, stopped, v);
    for (size_t i = 0; i < k->n; i++)
        if (stopped[i])
            kl_alert_stopped(k, &k->e[i], now_ms);
    kl_unlock(k);
    return dec;
}

enum gw_limit_decision
gw_keylimits_admit(struct gw_keylimits *k, uint64_t now_ms, const struct gw_period *cal,
                   uint64_t est_tokens, int64_t est_cost_micros, struct gw_limit_reservation *res,
                   struct gw_limit_verdict *v)
{
    struct kl_bucket *old[KL_ROLLS] = {NULL};
    const struct kl_total d = kl_need(est_tokens, est_cost_micros);
    const uint64_t sec = now_ms / 1000;
    uint64_t rsec[KL_ROLLS];
    enum gw_limit_decision dec;
    bool stopped[GW_KEYLIMITS_MAX_ENTRIES] = {false};

    memset(res, 0, sizeof(*res));
    if (v)
        memset(v, 0, sizeof(*v));

    kl_lock(k);
    kl_advance(k, now_ms, cal);
    kl_admit_secs(k, sec, rsec);
    if (kl_make_room(k, rsec, old)) {
        kl_advance(k, now_ms, cal); /* the lock was dropped */
        kl_admit_secs(k, sec, rsec);
    }

    dec = kl_decide(k, now_ms, &d, true, stopped, v);
    if (dec == GW_LIMIT_OK) {
        for (unsigned i = 0; i < KL_ROLLS; i++) {
            struct kl_roll *r = &k->roll[i];
            struct kl_bucket *b = kl_roll_bucket(r, rsec[i], &res->roll_sec[i]);

            kl_total_add(&b->t, &d);
            kl_total_add(&r->sum, &d);
            res->in_roll[i] = true;
        }
        for (unsigned i = 0; i < KL_CALS; i++) {
            kl_total_add(&k->cal[i].t, &d);
            kl_total_add(&k->cal[i].held, &d);
            res->cal_gen[i] = k->cal[i].gen;
        }
        res->tokens = d.tokens;
        res->cost_micros = d.cost;
        res->active = true;
        kl_check_alerts(k, now_ms, false);
    } else {
        for (size_t i = 0; i < k->n; i++)
            if (stopped[i])
                kl_alert_stopped(k, &k->e[i], now_ms);
    }
    kl_unlock(k);
    for (unsigned i = 0; i < KL_ROLLS; i++)
        gw_free(old[i]);
    return dec;
}

/* One settlement, <k> locked: gw_keylimits_settle's work. */
static void
kl_settle_locked(struct gw_keylimits *k, const struct gw_limit_reservation *res, uint64_t now_ms,
                 const struct gw_usage *u, int64_t cost_micros, bool reached_upstream)
{
    struct kl_total minus = {.tokens = res->tokens, .cost = res->cost_micros}, plus = {0};
    const struct kl_total held = {.requests = 1, .tokens = res->tokens, .cost = res->cost_micros};

    if (reached_upstream) {
        plus = kl_usage_total(u, cost_micros);
        plus.requests = 0; /* the request itself stays counted */
    } else {
        minus.requests = 1;
    }
    kl_advance(k, now_ms, NULL);
    for (unsigned i = 0; i < KL_ROLLS; i++) {
        struct kl_roll *r = &k->roll[i];
        long at;

        if (!res->in_roll[i] || !kl_roll_alive(r, res->roll_sec[i]))
            continue;
        at = kl_roll_find(r, res->roll_sec[i]);
        if (at < 0)
            continue;
        kl_total_settle(&kl_roll_at(r, (uint32_t)at)->t, &minus, &plus);
        kl_total_settle(&r->sum, &minus, &plus);
    }
    for (unsigned i = 0; i < KL_CALS; i++) {
        struct kl_cal *c = &k->cal[i];

        if (c->gen != res->cal_gen[i])
            continue; /* that period ended: not counted again */
        kl_total_sub(&c->held, &held);
        kl_total_settle(&c->t, &minus, &plus);
    }
    kl_check_alerts(k, now_ms, false);
}

void
gw_keylimits_settle(struct gw_keylimits *k, struct gw_limit_reservation *res, uint64_t now_ms,
                    const struct gw_usage *u, int64_t cost_micros, bool reached_upstream)
{
    if (!res->active)
        return;
    kl_lock(k);
    kl_settle_locked(k, res, now_ms, u, cost_micros, reached_upstream);
    kl_unlock(k);
    res->active = false;
}

void
gw_keylimits_settle_all(struct gw_limit_settlement *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct gw_keylimits *k = v[i].k;

        if (!k)
            continue;
        kl_lock(k);
        for (size_t j = i; j < n; j++) {
            struct gw_limit_settlement *x = &v[j];

            if (x->k != k)
                continue;
            if (x->res.active)
                kl_settle_locked(k, &x->res, x->now_ms, &x->usage, x->cost_micros,
                                 x->reached_upstream);
            x->res.active = false;
            x->k = NULL;
        }
        kl_unlock(k);
    }
}

/* ---- rebuild ---- */

bool
gw_keylimits_row_counts(const struct gw_row *row)
{
    unsigned n = row->n_attempts < GW_ROW_MAX_ATTEMPTS ? row->n_attempts : GW_ROW_MAX_ATTEMPTS;

    for (unsigned i = 0; i < n; i++) {
        switch ((enum gw_outcome)row->attempts[i].outcome) {
        case GW_OUT_OK:
        case GW_OUT_FAILED:
        case GW_OUT_SLOW_START:
        case GW_OUT_CANCELLED:
        case GW_OUT_TOO_SLOW: return true;
        default: break; /* none, refused, skipped:*: never sent */
        }
    }
    return false;
}

void
gw_keylimits_rebuild_add(struct gw_keylimits *k, const struct gw_row *row, uint64_t now_ms,
                         const struct gw_period *cal, unsigned flags)
{
    struct kl_bucket *old[KL_ROLLS] = {NULL};
    struct kl_total d;
    uint64_t sec = row->ts_ms / 1000, where;

    if (!gw_keylimits_row_counts(row))
        return;
    d = kl_usage_total(&row->usage, row->cost_micros);
    if (sec > now_ms / 1000)
        sec = now_ms / 1000; /* a row from the future (clock step): now */

    kl_lock(k);
    kl_advance(k, now_ms, cal);
    if (flags & GW_KEYLIMITS_F_ROLLING) {
        const uint64_t rsec[KL_ROLLS] = {sec, sec};

        if (kl_make_room(k, rsec, old))
            kl_advance(k, now_ms, cal);
        for (unsigned i = 0; i < KL_ROLLS; i++) {
            struct kl_roll *r = &k->roll[i];
            struct kl_bucket *b;

            if (!kl_roll_alive(r, sec))
                continue;
            b = kl_roll_bucket(r, sec, &where);
            kl_total_add(&b->t, &d);
            kl_total_add(&r->sum, &d);
        }
    }
    if (flags & GW_KEYLIMITS_F_CALENDAR) {
        for (unsigned i = 0; i < KL_CALS; i++) {
            struct kl_cal *c = &k->cal[i];

            if (c->end_ms != 0 && row->ts_ms >= c->start_ms && row->ts_ms < c->end_ms)
                kl_total_add(&c->t, &d);
        }
    }
    kl_check_alerts(k, now_ms, true);
    kl_unlock(k);
    for (unsigned i = 0; i < KL_ROLLS; i++)
        gw_free(old[i]);
}

void
gw_keylimits_recount_init(struct gw_keylimits_recount *rc, const struct gw_period *cal)
{
    memset(rc, 0, sizeof(*rc));
    rc->cal = *cal;
}

void
gw_keylimits_recount_add(struct gw_keylimits_recount *rc, const struct gw_row *row)
{
    struct kl_total d;

    if (!gw_keylimits_row_counts(row))
        return;
    d = kl_usage_total(&row->usage, row->cost_micros);
    for (unsigned i = 0; i < KL_CALS; i++) {
        const struct gw_period_span *s = kl_span(&rc->cal, i);
        struct gw_limit_totals *t = &rc->t[i];

        if (row->ts_ms < s->start_ms || row->ts_ms >= s->end_ms)
            continue;
        t->requests += d.requests;
        t->tokens += d.tokens;
        t->cache_reads += d.cache_reads;
        t->cost_micros += d.cost;
    }
}

bool
gw_keylimits_recount_apply(struct gw_keylimits *k, const struct gw_keylimits_recount *rc,
                           uint64_t now_ms)
{
    bool applied = false;

    kl_lock(k);
    kl_advance(k, now_ms, NULL);
    for (unsigned i = 0; i < KL_CALS; i++) {
        const struct gw_period_span *s = kl_span(&rc->cal, i);
        const struct kl_cal *c = &k->cal[i];

        if (s->end_ms <= s->start_ms || now_ms < s->start_ms || now_ms >= s->end_ms ||
            (c->end_ms != 0 && c->start_ms >= s->end_ms))
            goto out; /* the period moved on again (or was never current): drop it */
    }
    for (unsigned i = 0; i < KL_CALS; i++) {
        const struct gw_period_span *s = kl_span(&rc->cal, i);
        const struct gw_limit_totals *t = &rc->t[i];
        struct kl_cal *c = &k->cal[i];

        if (c->start_ms != s->start_ms) {
            /* Another period than the one announced in: its alerts are due again. */
            for (size_t j = 0; j < k->n; j++)
                if (k->e[j].per == (enum gw_limit_per)(GW_LIMIT_DAY + i))
                    k->e[j].fired_gen[0] = k->e[j].fired_gen[1] = 0;
        }
        c->start_ms = s->start_ms;
        c->end_ms = s->end_ms;
        c->t = (struct kl_total){.requests = t->requests,
                                 .tokens = t->tokens,
                                 .cache_reads = t->cache_reads,
                                 .cost = t->cost_micros};
        kl_total_add(&c->t, &c->held);
    }
    kl_check_alerts(k, now_ms, true);
    applied = true;
out:
    kl_unlock(k);
    return applied;
}

/* ---- alerts and views ---- */

bool
gw_keylimits_has_alerts(const struct gw_keylimits *k)
{
    /* RELAXED: a hint; take_alerts reads the queue under the lock. */
    return __atomic_load_n(&k->a_pending, __ATOMIC_RELAXED) != 0;
}

uint64_t
gw_keylimits_alerts_dropped(const struct gw_keylimits *k)
{
    /* RELAXED: a statistic. */
    return __atomic_load_n(&k->a_dropped, __ATOMIC_RELAXED);
}

size_t
gw_keylimits_take_alerts(struct gw_keylimits *k, struct gw_limit_alert *out, size_t max)
{
    size_t n = 0;

    kl_lock(k);
    while (n < max && k->a_n > 0) {
        out[n++] = k->alerts[k->a_head];
        k->a_head = (k->a_head + 1) % GW_KEYLIMITS_MAX_ALERTS;
        k->a_n--;
    }
    /* RELAXED: see kl_alert_push. */
    __atomic_store_n(&k->a_pending, k->a_n, __ATOMIC_RELAXED);
    kl_unlock(k);
    return n;
}

size_t
gw_keylimits_view(struct gw_keylimits *k, uint64_t now_ms, const struct gw_period *cal,
                  struct gw_limit_view *out, size_t max)
{
    size_t n = 0;

    kl_lock(k);
    kl_advance(k, now_ms, cal);
    for (size_t i = 0; i < k->n && n < max; i++, n++) {
        const struct kl_entry *e = &k->e[i];
        struct gw_limit_view *o = &out[n];

        o->per = e->per;
        o->measure = e->measure;
        o->cache_reads = e->cache_reads;
        o->max = e->max;
        o->used = kl_used(k, e);
        o->resets_at_ms = kl_resets_at(k, e, now_ms);
        o->reached = o->used >= o->max;
    }
    kl_unlock(k);
    return n;
}

const char *
gw_limit_measure_str(enum gw_limit_measure m)
{
    switch (m) {
    case GW_LIMIT_REQUESTS: return "requests";
    case GW_LIMIT_TOKENS: return "tokens";
    case GW_LIMIT_COST: return "cost";
    }
    return "unknown";
}

/* ---- unpriced models (DESIGN.md 8: a cost limit cannot see them) ---- */

void
gw_keylimits_note_unpriced(struct gw_keylimits *k, const char *model)
{
    size_t i;

    kl_lock(k);
    for (i = 0; i < k->n_unpriced; i++)
        if (strcmp(k->unpriced[i], model) == 0)
            break;
    if (i == k->n_unpriced && k->n_unpriced < GW_KEYLIMITS_MAX_UNPRICED) {
        snprintf(k->unpriced[k->n_unpriced], sizeof(k->unpriced[0]), "%s", model);
        k->n_unpriced++;
    }
    kl_unlock(k);
}

size_t
gw_keylimits_unpriced(struct gw_keylimits *k, char out[][GW_MODEL_MAX + 1], size_t max)
{
    size_t i, n;

    kl_lock(k);
    n = k->n_unpriced < max ? k->n_unpriced : max;
    for (i = 0; i < n; i++)
        memcpy(out[i], k->unpriced[i], sizeof(out[i]));
    kl_unlock(k);
    return n;
}
