/* SPDX-License-Identifier: MIT
 * core/sticky.h - the conversation stickiness table (DESIGN.md section 5): which
 * upstream answered a conversation last, and whether its prompt cache is worth staying
 * for. One table is shared by all worker threads; it is sharded, each shard behind its
 * own spinlock held for a few instructions. Pure: times are arguments.
 * Owns:    its entries (fixed at creation; nothing is allocated afterwards).
 * Threads: any; no call blocks beyond a shard lock held for one probe window.
 * See:     core/sticky.c, tests/unit/core/test_sticky.c
 */
#ifndef GW_CORE_STICKY_H
#define GW_CORE_STICKY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/row-t.h"

/* Across turns, a conversation sticks only when its previous answer read or wrote at
 * least this many prompt-cache tokens, less than GW_STICKY_CACHE_MS ago. */
#define GW_STICKY_MIN_CACHE_TOKENS 1024
#define GW_STICKY_CACHE_MS 300000

struct gw_sticky;

/* Creates a table of <capacity> entries in total (rounded up to a power of two, at least
 * 1), split into up to 64 shards. Returns NULL when out of memory (or when <capacity> is
 * absurdly large); free with gw_sticky_free. Any thread, usually at startup. */
struct gw_sticky *gw_sticky_new(size_t capacity);

/* Frees <t> (NULL is fine). No other thread may still use it. */
void gw_sticky_free(struct gw_sticky *t);

/* The key of a conversation: a 64-bit hash of its identity's <n> parts (<parts>[i] of
 * <lens>[i] bytes; a part of length 0 may be NULL), e.g. the client name and the
 * prompt_cache_key, or the key, the system prompt and the first user message. Each part
 * is hashed with its length, so ("ab","c") and ("a","bc") differ. Never 0. Not keyed:
 * a client that forges collisions only evicts or shares its own conversations' entries
 * when the caller includes the client's identity among the parts. Any thread. */
uint64_t gw_sticky_key(const void *const parts[], const size_t lens[], size_t n);

/* After an answer: conversation <key> was answered by <provider> (a NUL-terminated name
 * of at most GW_NAME_MAX bytes) at <now_ms>, which read or wrote <cache_tokens>
 * prompt-cache tokens. Replaces what the key held. When the key's probe window is full,
 * the entry recorded longest ago is evicted. A longer name is not recorded and the key
 * is forgotten instead. <key> 0 is ignored. Any thread; never blocks beyond the shard
 * lock. */
void gw_sticky_record(struct gw_sticky *t, uint64_t key, const char *provider, uint64_t now_ms,
                      uint64_t cache_tokens);

/* Whether conversation <key> sticks at <now_ms>, and to which upstream: within a turn
 * (<within_turn>: the request carries tool results) whenever the previous request's
 * upstream is known; across turns only when the previous answer read or wrote at least
 * GW_STICKY_MIN_CACHE_TOKENS prompt-cache tokens and now_ms - recorded <
 * GW_STICKY_CACHE_MS (a <now_ms> before the recorded time, from another thread's clock,
 * counts as age 0). On true, <provider_out> receives the NUL-terminated name; on false
 * it is untouched. Whether that upstream can take the request (paused, cooling) is the
 * router's business. Any thread; never blocks beyond the shard lock. */
bool gw_sticky_lookup(struct gw_sticky *t, uint64_t key, uint64_t now_ms, bool within_turn,
                      char provider_out[GW_NAME_MAX + 1]);

/* Drops conversation <key> (e.g. after a too-slow cut, so that it does not stick this
 * turn). Unknown keys are fine. Any thread. */
void gw_sticky_forget(struct gw_sticky *t, uint64_t key);

#endif
