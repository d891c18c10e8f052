/* SPDX-License-Identifier: MIT
 * core/sticky.c - the conversation stickiness table.
 * One allocation holds the table, its shards' locks and all entries. A key picks its
 * shard from its top bits and the start of its probe window (STICKY_PROBE slots, wrapping
 * inside the shard) from its low bits; every operation scans that window once, so no
 * loop is unbounded and a forgotten slot needs no tombstone. A full window evicts the
 * entry recorded longest ago.
 * Locks: one test-and-test-and-set spinlock per shard, written with GCC __atomic
 * builtins (exchange with ACQUIRE to take it, store with RELEASE to drop it) rather than
 * ck_spinlock, whose loads are volatile accesses that ThreadSanitizer cannot model as
 * synchronisation. A lock is held for one probe window's scan and a 65-byte copy; never
 * across an allocation, a log call or anything that blocks.
 * Owns:    the table's one allocation.
 * Threads: any; shared by all workers.
 * See:     core/sticky.h, tests/unit/core/test_sticky.c
 */
#include "core/sticky.h"

#include <string.h>

#include "core/alloc.h"
#include "core/spin.h"

#define STICKY_MAX_SHARDS 64
#define STICKY_PROBE 8 /* slots scanned per operation (fewer when a shard is smaller) */

struct sticky_entry {
    uint64_t key; /* 0: free */
    uint64_t at_ms;
    uint64_t cache_tokens;
    char provider[GW_NAME_MAX + 1];
};

/* One lock per cache line, so that workers on different shards do not share lines. */
struct sticky_shard {
    struct gw_spin lock;
    char pad[64 - sizeof(int)];
};

struct gw_sticky {
    size_t nshards;   /* power of two, 1..STICKY_MAX_SHARDS */
    size_t shard_cap; /* entries per shard, power of two */
    size_t probe;     /* min(STICKY_PROBE, shard_cap) */
    struct sticky_shard *shards;
    struct sticky_entry *entries; /* nshards * shard_cap, shard by shard */
};

/* ---- locks ---- */

static void
sticky_lock(struct sticky_shard *sh)
{
    gw_spin_lock(&sh->lock);
}

static void
sticky_unlock(struct sticky_shard *sh)
{
    gw_spin_unlock(&sh->lock);
}

/* ---- table ---- */

struct gw_sticky *
gw_sticky_new(size_t capacity)
{
    struct gw_sticky *t;
    size_t cap = 1, nshards, head, bytes;

    while (cap < capacity) {
        if (cap > SIZE_MAX / 2)
            return NULL;
        cap <<= 1;
    }
    nshards = cap / STICKY_PROBE;
    if (nshards < 1)
        nshards = 1;
    if (nshards > STICKY_MAX_SHARDS)
        nshards = STICKY_MAX_SHARDS;

    /* [struct gw_sticky][shards][entries]: every size is a multiple of 8. */
    _Static_assert(sizeof(struct gw_sticky) % 8 == 0, "entries stay aligned");
    _Static_assert(sizeof(struct sticky_entry) % 8 == 0, "entries stay aligned");
    head = sizeof(*t) + nshards * sizeof(struct sticky_shard);
    if (cap > (SIZE_MAX - head) / sizeof(struct sticky_entry))
        return NULL;
    bytes = head + cap * sizeof(struct sticky_entry);
    t = gw_calloc(1, bytes);
    if (!t)
        return NULL;
    t->nshards = nshards;
    t->shard_cap = cap / nshards;
    t->probe = t->shard_cap < STICKY_PROBE ? t->shard_cap : STICKY_PROBE;
    t->shards = (struct sticky_shard *)(void *)(t + 1);
    t->entries = (struct sticky_entry *)(void *)(t->shards + nshards);
    return t;
}

void
gw_sticky_free(struct gw_sticky *t)
{
    gw_free(t);
}

/* The shard of <key>: its top 6 bits (the slot uses the low bits). */
static size_t
sticky_shard_of(const struct gw_sticky *t, uint64_t key)
{
    return (size_t)(key >> 58) & (t->nshards - 1);
}

/* The entry of <key> in its probe window, or NULL. Shard lock held. */
static struct sticky_entry *
sticky_find(struct gw_sticky *t, size_t shard, uint64_t key)
{
    struct sticky_entry *base = t->entries + shard * t->shard_cap;
    size_t mask = t->shard_cap - 1, start = (size_t)key & mask;

    for (size_t i = 0; i < t->probe; i++) {
        struct sticky_entry *e = &base[(start + i) & mask];

        if (e->key == key)
            return e;
    }
    return NULL;
}

void
gw_sticky_record(struct gw_sticky *t, uint64_t key, const char *provider, uint64_t now_ms,
                 uint64_t cache_tokens)
{
    size_t shard, len, mask, start;
    struct sticky_entry *base, *found = NULL, *empty = NULL, *oldest = NULL, *e;

    if (key == 0)
        return;
    len = strnlen(provider, GW_NAME_MAX + 1);
    if (len > GW_NAME_MAX) {
        gw_sticky_forget(t, key);
        return;
    }
    shard = sticky_shard_of(t, key);
    base = t->entries + shard * t->shard_cap;
    mask = t->shard_cap - 1;
    start = (size_t)key & mask;

    sticky_lock(&t->shards[shard]);
    for (size_t i = 0; i < t->probe; i++) {
        e = &base[(start + i) & mask];
        if (e->key == key) {
            found = e;
            break;
        }
        if (e->key == 0) {
            if (!empty)
                empty = e;
        } else if (!oldest || e->at_ms < oldest->at_ms) {
            oldest = e;
        }
    }
    e = found ? found : empty ? empty : oldest;
    e->key = key;
    e->at_ms = now_ms;
    e->cache_tokens = cache_tokens;
    memcpy(e->provider, provider, len);
    e->provider[len] = '\0';
    sticky_unlock(&t->shards[shard]);
}

bool
gw_sticky_lookup(struct gw_sticky *t, uint64_t key, uint64_t now_ms, bool within_turn,
                 char provider_out[GW_NAME_MAX + 1])
{
    size_t shard;
    struct sticky_entry *e;
    bool hit = false;

    if (key == 0)
        return false;
    shard = sticky_shard_of(t, key);
    sticky_lock(&t->shards[shard]);
    e = sticky_find(t, shard, key);
    if (e) {
        uint64_t age = now_ms > e->at_ms ? now_ms - e->at_ms : 0;

        hit = within_turn ||
              (e->cache_tokens >= GW_STICKY_MIN_CACHE_TOKENS && age < GW_STICKY_CACHE_MS);
        if (hit)
            memcpy(provider_out, e->provider, sizeof(e->provider));
    }
    sticky_unlock(&t->shards[shard]);
    return hit;
}

void
gw_sticky_forget(struct gw_sticky *t, uint64_t key)
{
    size_t shard;
    struct sticky_entry *e;

    if (key == 0)
        return;
    shard = sticky_shard_of(t, key);
    sticky_lock(&t->shards[shard]);
    e = sticky_find(t, shard, key);
    if (e)
        e->key = 0;
    sticky_unlock(&t->shards[shard]);
}

/* ---- keys ---- */

/* A wyhash-style multiply-fold: 64x64 -> 128-bit product, halves xored. */
#define STICKY_K0 0xa0761d6478bd642fULL
#define STICKY_K1 0xe7037ed1a0b428dbULL
#define STICKY_K2 0x8ebc6af09c88c6e3ULL
#define STICKY_K3 0x589965cc75374cc3ULL

static uint64_t
sticky_mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;

    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint64_t
sticky_load64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

uint64_t
gw_sticky_key(const void *const parts[], const size_t lens[], size_t n)
{
    uint64_t h = STICKY_K0 ^ (uint64_t)n;

    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = parts[i];
        size_t left = lens[i];

        /* The length goes in before the bytes: this is the separator that keeps
         * ("ab","c") apart from ("a","bc"). */
        h = sticky_mum(h ^ STICKY_K1, (uint64_t)left ^ STICKY_K2);
        for (; left >= 16; p += 16, left -= 16)
            h = sticky_mum(sticky_load64(p) ^ STICKY_K1, sticky_load64(p + 8) ^ h);
        if (left) {
            unsigned char tail[16] = {0};

            memcpy(tail, p, left);
            h = sticky_mum(sticky_load64(tail) ^ STICKY_K1, sticky_load64(tail + 8) ^ h);
        }
    }
    h = sticky_mum(h ^ STICKY_K3, STICKY_K0 ^ (uint64_t)n);
    return h ? h : 1; /* 0 means a free slot */
}
