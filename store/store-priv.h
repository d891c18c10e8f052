/* SPDX-License-Identifier: MIT
 * store/store-priv.h - shared inside store/ and with its unit tests only: the layout of
 * struct store, the key, row and response codecs, the write helpers of the writer
 * thread, the table of responses not yet committed, and test hooks (ring size, schema
 * version, synchronous prune, the pending-bytes bound).
 * Owns:    nothing; struct store owns the environment, the ring and every queued row and
 *          response.
 * Threads: as documented per function.
 * See:     store/store.c, store/writer.c, store/codec.c, store/resp.c,
 *          tests/unit/store/test_store.c, tests/unit/store/test_resp.c
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
#define STORE_ROW_ENC_VERSION 4u
#define STORE_LEARNED_PENDING 256 /* learned limits waiting for the writer */
#define STORE_LEARNED_KEY_MAX (GW_NAME_MAX + 1 + GW_MODEL_MAX + 1 + 13 + 1)

/* Responses conversations (store/resp.c). */
#define STORE_RESP_ENC_VERSION 2u
#define STORE_RESP_HEAD_FIXED 13 /* version, head length, shape, flags, be64 ts, name length */
/* the fixed part, the provider's name, the client's name with its length byte (v2) */
#define STORE_RESP_HEAD_MAX (STORE_RESP_HEAD_FIXED + GW_NAME_MAX + 1 + GW_NAME_MAX)
#define STORE_RESP_TS_KEY_MAX (8 + STORE_RESP_ID_MAX) /* be64 ts_ms | id */
#define STORE_RESP_BUCKETS 256u                       /* pending table; power of two */
#define STORE_RESP_PENDING_MAX ((size_t)256 << 20)    /* bytes held before commit, all puts */
#define STORE_RESP_BATCH_BYTES ((size_t)64 << 20)     /* bytes a write transaction takes */
#define STORE_RESP_PRUNE_CHUNK 256u                   /* responses deleted per transaction */

/* One response put and not yet committed or dropped. One allocation: the struct, then
 * the LMDB value it will be written as (head, then the items). References: one held by
 * the pending table from put until the writer settles it, one by each store_resp_get
 * copying it out; the last store_resp_unref frees it. Every field but <refs>, <hnext> and
 * <qnext> is set before it is published (under resp_mu) and never changes after. */
struct store_resp {
    struct store_resp *hnext; /* the table's chain, newest first; under resp_mu */
    struct store_resp *qnext; /* the writer's queue, then its taken batch */
    _Atomic unsigned refs;
    uint64_t hash;
    uint64_t ts_ms;
    size_t id_len;
    size_t len; /* of <val> */
    char id[STORE_RESP_ID_MAX + 1];
    unsigned char val[];
};

/* A row on its way to the writer: its encoding (store_row_encode), made by the thread
 * that submits it, so that only these bytes move to the writer's core. The rows
 * themselves crossed before (4 KB each, filled on a worker, encoded on the writer, given
 * back): their cache lines moving between the cores were about 3% of gwd's cycles under
 * perf. Records of STORE_REC_CAP bytes (a row with one or two attempts) go back and
 * forth through the back ring; a larger one is allocated to its size and freed. */
struct store_rec {
    uint64_t ts_ms; /* the row's, for its key */
    uint32_t len;   /* of enc */
    uint32_t cap;   /* STORE_REC_CAP, or len for a larger record */
    unsigned char enc[];
};
#define STORE_REC_CAP (1024u - sizeof(struct store_rec))

struct store {
    MDB_env *env;
    MDB_dbi dbi_meta;      /* "schema" -> be32 version; "seq" -> be64 last sequence */
    MDB_dbi dbi_rows;      /* be64 ts | be64 seq -> encoded row */
    MDB_dbi dbi_by_client; /* client bytes | NUL | be64 ts | be64 seq -> empty */
    MDB_dbi dbi_resp;      /* response id -> head | items JSON (store/resp.c) */
    MDB_dbi dbi_resp_ts;   /* be64 ts_ms | response id -> empty (retention) */
    MDB_dbi dbi_learned;   /* provider|0|model|0|fp|0|win -> learned limit (store/learned.c) */
    /* Learned limits put and not yet committed (store/learned.c); learned_mu guards both. */
    pthread_mutex_t learned_mu;
    size_t n_learned;
    struct store_learned learned[STORE_LEARNED_PENDING];
    char *path;

    /* Queue: ck_ring used only through q_mpsc_put (any thread) and q_mpsc_take (writer,
     * or main once the writer is stopped). Slots hold struct store_rec *. */
    struct ck_ring q;
    struct ck_ring_buffer *q_buf;
    /* Records the writer is done with, for submitters to fill again: ck_ring used only
     * through back_put (the writer, or main once the writer is stopped) and back_take
     * (any submitter). A record freed by the writer went back to the worker's malloc
     * arena under its lock, and a batch of them made the arena trim its top and fault the
     * pages in again. Slots hold struct store_rec * of STORE_REC_CAP. */
    struct ck_ring back;
    struct ck_ring_buffer *back_buf;

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
    _Atomic uint64_t batch_rows[STORE_BATCH_BUCKETS + 1]; /* writer only adds */
    _Atomic uint64_t batch_rows_sum;
    _Atomic uint64_t commit_us[STORE_COMMIT_BUCKETS + 1];
    _Atomic uint64_t commit_us_sum;
    /* For store_sync: rows put on the queue, and rows the writer took off it and
     * committed or dropped. Seq-cst: a sync compares the two. */
    _Atomic uint64_t rows_queued;
    _Atomic uint64_t rows_handled;

    /* Responses put and not yet settled by the writer (store/resp.c). resp_mu guards the
     * table, the queue and <resp_pending_bytes>; it is held for pointer updates only (no
     * allocation, copy or I/O under it), by workers (put, get) and the writer (take,
     * settle). Entries stay in the table while the writer writes them, and leave it only
     * after their transaction committed (or failed), so a get that misses the table
     * starts its read transaction after the commit and finds the entry in LMDB. */
    pthread_mutex_t resp_mu;
    struct store_resp *resp_tab[STORE_RESP_BUCKETS];
    struct store_resp *resp_qhead;  /* oldest put not yet taken by the writer */
    struct store_resp **resp_qtail; /* &last->qnext, or &resp_qhead when empty */
    size_t resp_pending_bytes;      /* <len> of every entry in the table */
    size_t resp_pending_max;        /* STORE_RESP_PENDING_MAX; tests lower it */
    bool resp_logged;               /* writer only: a response write failure was reported */
    /* Counters as above (relaxed), and queued/handled for store_sync (seq-cst). */
    _Atomic uint64_t resp_puts;
    _Atomic uint64_t resp_committed;
    _Atomic uint64_t resp_dropped;
    _Atomic uint64_t resp_pruned;
    _Atomic uint64_t resp_queued;
    _Atomic uint64_t resp_handled;
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

/* ---- learned limits (store/learned.c) ---- */

/* Commits the pending learned limits in one transaction of its own (writer thread, or
 * main at close). Failures are logged once per call and the batch is lost (the next
 * save of the control thread puts them again). */
void store_learned_commit(struct store *s);

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

/* ---- response codec (store/codec.c) ---- */

/* Writes the head of a stored response into <buf> (STORE_RESP_HEAD_MAX bytes): version,
 * head length, <shape> (0..255), <flags>, be64 <ts_ms>, the length of <provider> and its
 * <plen> bytes, the length of <client> and its <clen> bytes (each at most GW_NAME_MAX).
 * Returns the head length; the items follow it. */
size_t store_resp_head_encode(unsigned char *buf, uint64_t ts_ms, const char *provider, size_t plen,
                              const char *client, size_t clen, int shape, unsigned flags);

/* Reads the head of a stored response value (<len> bytes at <val>): sets <ts_ms>,
 * <provider> and <client> (GW_NAME_MAX + 1 bytes each, NUL-terminated; the client is ""
 * in a version 1 head, which had none), <shape>, <flags> and <items_off> (where the
 * items start). Any argument but <val> may be NULL. false when the bytes are not a
 * response value or are cut short. Pure; any thread. */
bool store_resp_head_decode(const unsigned char *val, size_t len, uint64_t *ts_ms, char *provider,
                            char *client, int *shape, unsigned *flags, size_t *items_off);

/* Whether client <client> was once called <old> (store_client_renamed), read in <txn>,
 * or in a read transaction of its own when <txn> is NULL. Any thread. */
bool store_client_was(struct store *s, MDB_txn *txn, const char *client, const char *old);

/* Writes the responses_by_ts key of (<ts_ms>, <id>, <id_len>) into <key>
 * (STORE_RESP_TS_KEY_MAX bytes); returns its length. */
size_t store_resp_ts_key(unsigned char *key, uint64_t ts_ms, const char *id, size_t id_len);

/* ---- responses, writer side (store/resp.c) ---- */

/* Takes the oldest queued responses off the queue, up to <max_bytes> of values (always at
 * least one), linked through <qnext>; they stay in the table until settled. Sets <*more>
 * when some are left queued. NULL when none. Writer thread (or main once it stopped). */
struct store_resp *store_resp_take(struct store *s, size_t max_bytes, bool *more);

/* Writes the responses of <list> (from store_resp_take) in a transaction nested in
 * <txn>, so that a failure (MDB_MAP_FULL) aborts only them and the rows of <txn> still
 * commit. Returns 0 when they are part of <txn> now, or the LMDB error (the nested
 * transaction is then aborted; <txn> is unchanged). */
int store_resp_write(struct store *s, MDB_txn *txn, struct store_resp *list);

/* Removes every response of <list> from the table, counts it committed (<committed>) or
 * dropped, and drops the table's reference. Writer thread (or main once it stopped). */
void store_resp_settle(struct store *s, struct store_resp *list, bool committed);

/* Drops one reference to <r>; the last frees it. Any thread. */
void store_resp_unref(struct store_resp *r);

/* One retention transaction over responses: deletes at most <max> responses stored with
 * ts_ms older than <cutoff_ms>, oldest first (walking responses_by_ts); sets <*more>
 * when it stopped at <max>; adds the count to resp_pruned and to <*n> when not NULL. */
enum gw_code store_resp_prune_chunk(struct store *s, uint64_t cutoff_ms, unsigned max, bool *more,
                                    uint64_t *n);

/* Frees every response still in the table, counted dropped (the writer is stopped and
 * store_q_fini committed what it could). Main thread, at close. */
void store_resp_fini(struct store *s);

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

/* Deletes every row and every stored response with ts_ms older than <now_ms> - <row_days>
 * days, in transactions of at most STORE_PRUNE_CHUNK rows or STORE_RESP_PRUNE_CHUNK
 * responses, adding the counts to rows_pruned and resp_pruned and to <*n> (rows and
 * responses together) when not NULL. <row_days> 0 keeps everything. Any thread (LMDB
 * serialises write transactions); the writer thread does the same work at start and
 * hourly, one chunk a turn. Blocks on disk. */
enum gw_code store_prune(struct store *s, uint64_t now_ms, unsigned row_days, uint64_t *n);

/* One retention transaction: deletes at most <max> rows older than <cutoff_ms>; sets
 * <*more> when it stopped at <max>. */
enum gw_code store_prune_chunk(struct store *s, uint64_t cutoff_ms, unsigned max, bool *more,
                               uint64_t *n);

#endif
