/* SPDX-License-Identifier: MIT
 * store/store-priv.h - shared inside store/ and with its unit tests only: the layout of
 * struct store, the key and row codecs, the write helpers of the writer thread, and
 * test hooks (ring size, schema version, synchronous prune).
 * Owns:    nothing; struct store owns the environment, the ring and every queued row.
 * Threads: as documented per function.
 * See:     store/store.c, store/writer.c, store/codec.c, tests/unit/store/test_store.c
 */
#ifndef GW_STORE_STORE_PRIV_H
#define GW_STORE_STORE_PRIV_H

#include <ck_ring.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "store/store.h"

#define STORE_SCHEMA_VERSION 1u
#define STORE_RING_SIZE 65536u        /* power of two; holds size - 1 rows */
#define STORE_PRUNE_CHUNK 1000u       /* rows deleted per retention transaction */
#define STORE_PRUNE_EVERY_MS 3600000u /* hourly */
#define STORE_ROW_KEY_LEN 16          /* be64 ts_ms | be64 seq */
#define STORE_CLIENT_KEY_MAX (GW_NAME_MAX + 1 + STORE_ROW_KEY_LEN)
#define STORE_ROW_ENC_MAX 8192 /* bound of one encoded row (about 4 KiB max) */
#define STORE_ROW_ENC_VERSION 2u

struct store {
    MDB_env *env;
    MDB_dbi dbi_meta;      /* "schema" -> be32 version; "seq" -> be64 last sequence */
    MDB_dbi dbi_rows;      /* be64 ts | be64 seq -> encoded row */
    MDB_dbi dbi_by_client; /* client bytes | NUL | be64 ts | be64 seq -> empty */
    MDB_dbi dbi_by_seq;    /* be64 seq -> be64 ts (resolves page cursors) */
    char *path;

    /* Queue: ck_ring used only through q_mpsc_put (any thread) and q_mpsc_take (writer,
     * or main once the writer is stopped). Slots hold struct gw_row *. */
    struct ck_ring q;
    struct ck_ring_buffer *q_buf;

    /* Writer thread. mu guards <stop> and <sync_waiters>; workers never take mu. cv wakes
     * the writer; done_cv wakes store_sync callers after each of the writer's turns. */
    pthread_t writer;
    bool writer_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t done_cv;
    bool stop;
    unsigned sync_waiters;
    unsigned batch_ms;
    unsigned row_days;
    uint64_t seq;         /* last sequence used; writer thread (or main when stopped) */
    bool map_full_logged; /* writer only: MDB_MAP_FULL was reported on stderr */
    bool io_logged;       /* writer only: another write error was reported */

    /* Counters, C11 atomics with relaxed order (each is a count, nothing is published
     * through them). rows_dropped is added to by any thread, the rest by the writer (or by
     * the caller of store_prune); store_stats_get reads them from any thread. Not ck_pr:
     * ck's gcc port loads with plain volatile reads, which TSan reports as races. */
    _Atomic uint64_t rows_committed;
    _Atomic uint64_t rows_dropped;
    _Atomic uint64_t batches;
    _Atomic uint64_t rows_pruned;
    /* For store_sync: rows put on the queue, and rows the writer took off it and
     * committed or dropped. Seq-cst: a sync compares the two. */
    _Atomic uint64_t rows_queued;
    _Atomic uint64_t rows_handled;
};

/* ---- keys (store/codec.c) ---- */

static inline void
store_be64_put(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static inline uint64_t
store_be64_get(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Writes the rows key of (<ts_ms>, <seq>) into <key> (STORE_ROW_KEY_LEN bytes). */
static inline void
store_row_key(unsigned char *key, uint64_t ts_ms, uint64_t seq)
{
    store_be64_put(key, ts_ms);
    store_be64_put(key + 8, seq);
}

/* Writes the by_client key of <client> (NUL-terminated, at most GW_NAME_MAX bytes used)
 * and the rows key <rowkey> into <key> (STORE_CLIENT_KEY_MAX bytes); returns its length. */
size_t store_client_key(unsigned char *key, const char *client, const unsigned char *rowkey);

/* ---- row codec (store/codec.c) ---- */

/* Encodes <row> into <buf> (<cap> bytes, STORE_ROW_ENC_MAX is always enough). Returns the
 * length, or 0 when <cap> is too small. Pure; any thread. */
size_t store_row_encode(const struct gw_row *row, unsigned char *buf, size_t cap);

/* Decodes <len> bytes at <buf> into <row> (zeroed first). false when the bytes are not a
 * row of a known version or are cut short. Pure; any thread. */
bool store_row_decode(const unsigned char *buf, size_t len, struct gw_row *row);

/* Reads the client name out of an encoded row into <client> (GW_NAME_MAX + 1 bytes)
 * without decoding the rest. false when the bytes are not a row. */
bool store_row_decode_client(const unsigned char *buf, size_t len, char *client);

/* ---- writer internals (store/writer.c) ---- */

/* Sets the ring up with <size> slots (a power of two >= 4). GW_E_NOMEM. Main thread. */
enum gw_code store_q_init(struct store *s, unsigned size);

/* Commits every row still queued, then frees the ring. Writer must be stopped. */
void store_q_fini(struct store *s);

/* ---- test hooks ---- */

/* store_open with a ring of <ring_size> slots (power of two >= 4) instead of
 * STORE_RING_SIZE. Same contract as store_open. */
enum gw_code store_open_ring(const char *path, size_t map_size_mb, unsigned ring_size,
                             struct store **out, char *err, size_t errlen);

/* Overwrites the stored schema version with <version> (to test refusals). Writer
 * stopped. GW_E_STORE_IO. */
enum gw_code store_schema_set(struct store *s, uint32_t version);

/* Deletes every row with ts_ms older than <now_ms> - <row_days> days, in transactions of
 * at most STORE_PRUNE_CHUNK rows, adding the count to rows_pruned and to <*n> when not
 * NULL. <row_days> 0 keeps everything. Any thread (LMDB serialises write transactions);
 * the writer thread calls it at start and hourly. Blocks on disk. */
enum gw_code store_prune(struct store *s, uint64_t now_ms, unsigned row_days, uint64_t *n);

/* One retention transaction: deletes at most <max> rows older than <cutoff_ms>; sets
 * <*more> when it stopped at <max>. */
enum gw_code store_prune_chunk(struct store *s, uint64_t cutoff_ms, unsigned max, bool *more,
                               uint64_t *n);

#endif
