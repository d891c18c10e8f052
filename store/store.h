/* SPDX-License-Identifier: MIT
 * store/store.h - the LMDB store (DESIGN.md 13): request rows, written only by the
 * store writer thread in batched transactions, read by any thread.
 * Workers hand rows over through an MPSC ck_ring (store_row_submit) and never wait
 * for disk; the writer commits at least every <batch_ms> when there is work.
 * Owns:    the LMDB environment, the writer thread, every queued row.
 * Threads: store_open/close and writer_start/stop on main; submit on any thread
 *          (workers); reads on any thread (control), each in its own read transaction.
 * See:     store/store.c, store/writer.c, tests/unit/store/
 */
#ifndef GW_STORE_STORE_H
#define GW_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"

struct store;

/* Opens (creating the folder and the environment if needed) the store at <path> with a
 * map of <map_size_mb> MiB, checks/creates the schema version. GW_E_STORE_IO with a
 * message in <err> (size <errlen>) when it cannot. Main thread, before threads start. */
enum gw_code store_open(const char *path, size_t map_size_mb, struct store **out, char *err,
                        size_t errlen);

/* Starts the writer thread: commits queued rows in batches at least every <batch_ms>
 * when there is work; prunes rows older than <row_days> days (at start and hourly). */
enum gw_code store_writer_start(struct store *s, unsigned batch_ms, unsigned row_days);

/* Stops the writer after it has committed every row queued before the call. Blocks. */
void store_writer_stop(struct store *s);

/* Waits until every row queued before the call has been committed (or dropped by a
 * failed write), at most <timeout_ms>; true when it got there. For readers that must see
 * what was settled before them (the recount of key totals). Any thread but the writer
 * and the workers; blocks. */
bool store_sync(struct store *s, unsigned timeout_ms);

/* Closes the environment. Writer must be stopped. NULL is fine. */
void store_close(struct store *s);

/* Queues <*rowp> (allocated with gw_malloc) for the writer. Always takes ownership:
 * *rowp is NULL on return; if the queue is full the row is counted, freed and
 * GW_E_STORE_QUEUE_FULL returned. Any thread; never blocks. */
enum gw_code store_row_submit(struct store *s, struct gw_row **rowp);

/* Rows newest first. <cursor> 0 = from the newest; otherwise the <next> value of the
 * previous page. Fills up to <max> rows into <rows> (caller's array), sets <*n> and
 * <*next> (0 when there are no more). Own read transaction; any thread. */
enum gw_code store_rows_page(struct store *s, uint64_t cursor, struct gw_row *rows, size_t max,
                             size_t *n, uint64_t *next);

/* Calls <fn> for every row of <client> with ts_ms >= <since_ms>, oldest first (used by
 * rebuilds of key totals). Stops early when <fn> returns non-zero. Any thread. */
enum gw_code store_rows_by_client(struct store *s, const char *client, uint64_t since_ms,
                                  int (*fn)(void *arg, const struct gw_row *row), void *arg);

struct store_stats {
    uint64_t rows_committed; /* since open */
    uint64_t rows_dropped;   /* queue full */
    uint64_t batches;
    uint64_t rows_pruned;
};
void store_stats_get(struct store *s, struct store_stats *out);

#endif
