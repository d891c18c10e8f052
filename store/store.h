/* SPDX-License-Identifier: MIT
 * store/store.h - the LMDB store (DESIGN.md 13): request rows, and the conversations of
 * OpenAI Responses answers kept for previous_response_id (DESIGN.md 11), written only by
 * the store writer thread in batched transactions, read by any thread.
 * Workers hand rows over through an MPSC ck_ring (store_row_submit) and responses
 * through a small table (store_resp_put), and never wait for disk; the writer commits
 * both in the same transactions, at least every <batch_ms> when there is work.
 * Owns:    the LMDB environment, the writer thread, every queued row and response.
 * Threads: store_open/close and writer_start/stop on main; submit and put on any thread
 *          (workers); reads on any thread (control, workers), each in its own read
 *          transaction.
 * See:     store/store.c, store/writer.c, store/resp.c, tests/unit/store/
 */
#ifndef GW_STORE_STORE_H
#define GW_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "core/str.h"

struct store;

/* Opens (creating the folder and the environment if needed) the store at <path> with a
 * map of <map_size_mb> MiB, checks/creates the schema version. GW_E_STORE_IO with a
 * message in <err> (size <errlen>) when it cannot. Main thread, before threads start. */
enum gw_code store_open(const char *path, size_t map_size_mb, struct store **out, char *err,
                        size_t errlen);

/* Starts the writer thread: commits queued rows and responses in batches at least every
 * <batch_ms> when there is work; prunes rows and responses older than <row_days> days
 * (at start and hourly). */
enum gw_code store_writer_start(struct store *s, unsigned batch_ms, unsigned row_days);

/* Stops the writer after it has committed every row and response queued before the
 * call. Blocks. */
void store_writer_stop(struct store *s);

/* Waits until every row and response queued before the call has been committed (or
 * dropped by a failed write), at most <timeout_ms>; true when it got there. For readers that must
 * see what was settled before them (the recount of key totals). Any thread but the writer and the
 * workers; blocks. */
bool store_sync(struct store *s, unsigned timeout_ms);

/* Closes the environment. Writer must be stopped. NULL is fine. */
void store_close(struct store *s);

/* Queues <row> for the writer: its encoding, made here; the caller keeps <row> and may
 * fill it again at once. When the queue is full the row is counted in rows_dropped and
 * GW_E_STORE_QUEUE_FULL returned; out of memory, likewise with GW_E_NOMEM. Any thread;
 * never blocks. */
enum gw_code store_row_submit(struct store *s, const struct gw_row *row);

/* Where a page of rows starts: the rows key (request time, sequence) of the last row of
 * the page before; all zero: from the newest row. */
struct store_cursor {
    uint64_t ts_ms;
    uint64_t seq;
};

static inline bool
store_cursor_is_start(const struct store_cursor *c)
{
    return c->ts_ms == 0 && c->seq == 0;
}

/* Rows newest first, from <*cursor> (the <next> of the previous page, or all zero for
 * the newest). Fills up to <max> rows into <rows> (caller's array), sets <*n> and
 * <*next> (all zero when there are no more). Own read transaction; any thread. */
enum gw_code store_rows_page(struct store *s, const struct store_cursor *cursor,
                             struct gw_row *rows, size_t max, size_t *n, struct store_cursor *next);

/* Calls <fn> for every row of <client> with ts_ms >= <since_ms> (used by rebuilds of key
 * totals): first the rows of each name <client> was renamed from (store_client_renamed),
 * then its own, oldest first within each name. Stops early when <fn> returns non-zero.
 * Any thread. */
enum gw_code store_rows_by_client(struct store *s, const char *client, uint64_t since_ms,
                                  int (*fn)(void *arg, const struct gw_row *row), void *arg);

/* Records that client <old_name> is now called <new_name>, so that the key totals of
 * <new_name> are rebuilt from the rows of both (and of the names <old_name> had before),
 * at a reload and after a restart (DESIGN.md 14: a renamed key keeps its usage). One
 * small write transaction of its own, outside the writer thread: a rare operator action
 * (PUT /control/v1/keys/{name} with a new name, net/control.c), serialized with the
 * writer's batches by LMDB's writer lock; blocks on disk. GW_OK, GW_E_BAD_REQUEST (a name
 * too long or both equal), GW_E_STORE_IO. */
enum gw_code store_client_renamed(struct store *s, const char *old_name, const char *new_name);
/* Calls <fn> for every row with ts_ms >= <since_ms>, oldest first (the rebuild of
 * credentials' quota windows, net/quota.c). Stops early when <fn> returns non-zero. Any
 * thread. */
enum gw_code store_rows_since(struct store *s, uint64_t since_ms,
                              int (*fn)(void *arg, const struct gw_row *row), void *arg);

/* ---- learned quota limits (store/learned.c) ---- */

#define STORE_LEARNED_ORIGIN_MAX 48 /* GW_QUOTA_ORIGIN_MAX (core/quota.h) */

/* A limit an upstream stated on one window of one credential (core/quota.h's
 * gw_quota_learned with what it belongs to). */
struct store_learned {
    char provider[GW_NAME_MAX + 1];
    char model[GW_MODEL_MAX + 1]; /* "" = the provider's own set / pool account */
    char fp[13];                  /* the credential's fingerprint */
    unsigned win;                 /* enum gw_quota_win */
    uint64_t limit;
    uint64_t at_ms;
    char origin[STORE_LEARNED_ORIGIN_MAX + 1];
};

/* Keeps <l> (copied; replaces what was kept for the same provider, model, fingerprint and
 * window). Committed by the writer on its next turn (or at close). GW_OK, or
 * GW_E_STORE_QUEUE_FULL when 256 puts wait already (nothing kept). Any thread; takes a
 * mutex for a copy, never waits for disk. */
enum gw_code store_learned_put(struct store *s, const struct store_learned *l);

/* Calls <fn> for every kept learned limit (key order). Stops early when <fn> returns
 * non-zero. Any thread; its own read transaction. */
enum gw_code store_learned_each(struct store *s,
                                int (*fn)(void *arg, const struct store_learned *l), void *arg);

/* ---- Responses conversations (DESIGN.md 11, 13) ---- */

#define STORE_RESP_ID_MAX 128                   /* bytes of a response id */
#define STORE_RESP_ITEMS_MAX ((size_t)64 << 20) /* bytes of one response's items */

/* Keeps the conversation of the Responses answer <id> (the id the client saw, 1 to
 * STORE_RESP_ID_MAX bytes, NUL-terminated) for <client> (the gateway key's name whose
 * request it answered, 1 to GW_NAME_MAX bytes: only that client may read it back):
 * <len> bytes of <items> (the input and output items as JSON text, in the Responses
 * item shape; stored as given, not checked), the <provider> that produced it (at most
 * GW_NAME_MAX bytes, may be ""), the upstream <shape> (0..255; the caller's enum) and
 * its time <ts_ms> (wall clock, ms; retention deletes it <row_days> after that). Copies
 * everything: the caller keeps its buffers. A later put of the same id replaces the
 * earlier one. Visible to store_resp_get on every thread as soon as this returns,
 * before the writer commits it (it is held in memory until its batch commits); durable
 * once that batch commits, like a row (store_sync waits for it; store_writer_stop and
 * store_close commit it). GW_OK; GW_E_BAD_REQUEST for an empty or too long <id> or
 * <client>, a too long <provider> or a <shape> out of range (nothing is kept, nothing
 * counted); GW_E_BODY_TOO_LARGE when <len> exceeds STORE_RESP_ITEMS_MAX;
 * GW_E_STORE_QUEUE_FULL when the responses waiting for a commit already hold 256 MiB
 * (the writer is behind), and GW_E_NOMEM; these three are counted in resp_dropped.
 * Whether to call it at all (store: false in the request, store.responses: false in the
 * config) is the caller's decision. Any thread; never waits for disk (takes a mutex
 * held for a few pointer updates; copies <len> bytes). */
enum gw_code store_resp_put(struct store *s, const char *id, const char *client,
                            const char *provider, int shape, uint64_t ts_ms, const char *items,
                            size_t len);

/* Reads the conversation of response <id> (NUL-terminated) for <client>: the newest put
 * of that id, whether committed yet or not, when it was put for <client> or for a name
 * <client> was renamed from (store_client_renamed). On GW_OK, <provider> holds the
 * provider's name (NUL-terminated), <*shape> the shape given to the put, and <items>
 * exactly the items bytes (its earlier content is replaced; NUL-terminated as every
 * gw_buf; the caller keeps and frees it). GW_E_NOT_FOUND when no such response is kept
 * for <client> (never stored, pruned by retention, dropped, an id no put accepts,
 * another client's, or one kept before responses had an owner); GW_E_STORE_IO when the
 * stored value cannot be read; GW_E_NOMEM. On an error <items> is left empty. Any
 * thread (workers); copies the items (several MB at most) in its own read transaction
 * or from memory; never waits for the writer. */
enum gw_code store_resp_get(struct store *s, const char *id, const char *client,
                            char provider[GW_NAME_MAX + 1], int *shape, struct gw_buf *items);

/* Histogram bounds of store_stats (for /metrics): rows per batch, and commit time in µs
 * (0.5 ms to 2.5 s: a commit is an fsync, far below the request buckets). */
#define STORE_BATCH_BUCKETS 10
#define STORE_COMMIT_BUCKETS 12
extern const uint32_t store_batch_bounds[STORE_BATCH_BUCKETS];
extern const uint32_t store_commit_bounds_us[STORE_COMMIT_BUCKETS];

struct store_stats {
    uint64_t rows_committed; /* since open */
    uint64_t rows_dropped;   /* queue full */
    uint64_t batches;
    uint64_t rows_pruned;
    uint64_t resp_puts;      /* responses accepted by store_resp_put */
    uint64_t resp_committed; /* written by a committed batch */
    uint64_t resp_pruned;    /* deleted by retention */
    uint64_t resp_dropped;   /* refused (memory bound, no memory) or lost to a failed write */
    uint64_t queue_depth;    /* rows submitted and not yet committed or dropped */
    /* Rows per committed batch with rows, by bucket of store_batch_bounds (then +Inf). */
    uint64_t batch_rows[STORE_BATCH_BUCKETS + 1];
    uint64_t batch_rows_sum;
    /* Time of each successful mdb_txn_commit in µs, by bucket of store_commit_bounds_us. */
    uint64_t commit_us[STORE_COMMIT_BUCKETS + 1];
    uint64_t commit_us_sum;
};
void store_stats_get(struct store *s, struct store_stats *out);

#endif
