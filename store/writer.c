/* SPDX-License-Identifier: MIT
 * store/writer.c - the row queue (store_q_mpsc), the writer thread, batched commits
 * and retention.
 * Workers call store_row_submit, which encodes the row into a record and puts the
 * record's pointer on an MPSC ck_ring and returns: it never blocks, never takes a lock
 * and never signals. Responses wait in
 * their own table (store/resp.c). The writer thread wakes every <batch_ms> (a timed
 * wait on a condvar that store_writer_stop and store_sync signal), takes every queued
 * row and response and commits them in one write transaction, so either is durable at
 * most about one batch interval after it was queued. A turn starts <batch_ms> after the
 * one before started (at once when that one took longer). Between batches it prunes rows,
 * then responses, older than <row_days> days, one bounded transaction per turn (at
 * start and then hourly), so retention never holds commits back for long.
 * A failed write transaction (MDB_MAP_FULL: the map is too small) drops that batch:
 * the rows are counted in rows_dropped (responses in resp_dropped) and the first
 * failure of each kind is reported on stderr; the writer keeps running (retention may
 * free space again). Responses are written in a nested transaction, so when they alone
 * do not fit, only they are dropped and the rows commit.
 * store_sync waits (on done_cv) until the writer has handled as many rows and responses
 * as had been queued when it was called; while a sync waits, the writer takes no timed
 * pause.
 * A committed record is not freed: it goes on a second ring (SPMC: the writer puts,
 * submitters take) that store_row_submit takes records from, up to STORE_BACK_RECS.
 * Owns:    the writer thread; every record from submit until it is committed or
 *          dropped, and the records given back until a submitter takes one.
 * Threads: submit on any thread; start/stop on main; the rest on the writer thread
 *          (or on main once the writer is stopped: store_q_fini).
 * See:     store/store.h, store/store-priv.h, store/store.c
 */
#include "store/store-priv.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/metrics.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#define STORE_DAY_MS ((uint64_t)86400000)

const uint32_t store_batch_bounds[STORE_BATCH_BUCKETS] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
const uint32_t store_commit_bounds_us[STORE_COMMIT_BUCKETS] = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
};

static uint64_t
mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* For /metrics: the rows of a committed batch and how long its commit took. Relaxed
 * adds by the writer; store_stats_get reads them. */
static void
note_batch(struct store *s, unsigned rows, uint64_t commit_us)
{
    if (rows) {
        atomic_fetch_add_explicit(
            &s->batch_rows[gw_metrics_bucket(store_batch_bounds, STORE_BATCH_BUCKETS, rows)], 1,
            memory_order_relaxed);
        atomic_fetch_add_explicit(&s->batch_rows_sum, rows, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(
        &s->commit_us[gw_metrics_bucket(store_commit_bounds_us, STORE_COMMIT_BUCKETS, commit_us)],
        1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->commit_us_sum, commit_us, memory_order_relaxed);
}

/* ---- the queue: store_q_mpsc ---- */

/* ck_ring orders its slots with volatile accesses and fences, which ThreadSanitizer
 * cannot see; under TSan the helpers below tell it about the same edge (producer's
 * release before the enqueue, consumer's acquire after the dequeue), so a row's
 * contents are not reported. ck_ring's own counters need tests/tsan.supp. */
#if defined(__SANITIZE_THREAD__)
static inline void
tsan_release(void *p)
{
    __tsan_release(p);
}
static inline void
tsan_acquire(void *p)
{
    __tsan_acquire(p);
}
#else
static inline void
tsan_release(void *p)
{
    (void)p;
}
static inline void
tsan_acquire(void *p)
{
    (void)p;
}
#endif

/* Producer side, any thread; lock-free, never waits for the writer (ck's MP enqueue
 * only waits, for a few instructions, for producers that reserved earlier slots).
 * false when the ring is full (it holds size - 1 records). ck_ring_enqueue_mpsc
 * publishes the slot with a store fence before moving p_tail, so the record's contents,
 * written before this call, are visible to the writer once it sees the slot. */
static bool
q_mpsc_put(struct store *s, struct store_rec *rec)
{
    tsan_release(&s->q);
    return ck_ring_enqueue_mpsc(&s->q, s->q_buf, rec);
}

/* Consumer side: only the writer thread, or main once the writer has been joined.
 * NULL when empty. The load fence in the dequeue pairs with the producer's fence.
 * (ck_ring_dequeue_mpsc: the same single-consumer dequeue as _spsc, named after the
 * ring's one family as STYLE.md 9 asks.) */
static struct store_rec *
q_mpsc_take(struct store *s)
{
    struct store_rec *rec;

    if (!ck_ring_dequeue_mpsc(&s->q, s->q_buf, &rec))
        return NULL;
    tsan_acquire(&s->q);
    return rec;
}

/* ---- records given back ---- */

/* At most this many records wait to be filled again (1 KB each): a batch's worth at
 * about 80 000 requests a second (batch_ms 50). Records beyond it are freed by the
 * writer and allocated again by the submitters. */
#define STORE_BACK_RECS 4096

/* Single producer: the writer, or main once the writer is stopped. A larger record, or
 * one that does not fit, is freed. */
static void
back_put(struct store *s, struct store_rec *rec)
{
    tsan_release(&s->back);
    if (rec->cap != STORE_REC_CAP || !s->back_buf ||
        !ck_ring_enqueue_spmc(&s->back, s->back_buf, rec))
        gw_free(rec);
}

/* Any submitter: NULL when none is waiting. */
static struct store_rec *
back_take(struct store *s)
{
    struct store_rec *rec;

    if (!s->back_buf || !ck_ring_dequeue_spmc(&s->back, s->back_buf, &rec))
        return NULL;
    tsan_acquire(&s->back);
    return rec;
}

/* A record of <row> too long for STORE_REC_CAP (three attempts or more, long names):
 * allocated to its length. NULL when out of memory. */
static struct store_rec *
rec_large(const struct gw_row *row)
{
    struct store_rec *rec = gw_malloc(sizeof(*rec) + STORE_ROW_ENC_MAX), *fit;
    size_t len;

    if (!rec)
        return NULL;
    len = store_row_encode(row, rec->enc, STORE_ROW_ENC_MAX); /* always enough */
    fit = gw_realloc(rec, sizeof(*rec) + len);
    if (fit)
        rec = fit; /* else the larger block serves as well */
    rec->len = rec->cap = (uint32_t)len;
    return rec;
}

/* <row>'s record, in one given back when there is one; NULL when out of memory. */
static struct store_rec *
rec_of(struct store *s, const struct gw_row *row)
{
    struct store_rec *rec = back_take(s);
    size_t len;

    if (!rec) {
        rec = gw_malloc(sizeof(*rec) + STORE_REC_CAP);
        if (!rec)
            return NULL;
        rec->cap = STORE_REC_CAP;
    }
    len = store_row_encode(row, rec->enc, STORE_REC_CAP);
    if (len == 0) {
        gw_free(rec); /* only the writer gives records back */
        rec = rec_large(row);
        if (!rec)
            return NULL;
    } else {
        rec->len = (uint32_t)len;
    }
    rec->ts_ms = row->ts_ms;
    return rec;
}

enum gw_code
store_q_init(struct store *s, unsigned size)
{
    s->q_buf = gw_calloc(size, sizeof *s->q_buf);
    s->back_buf = gw_calloc(STORE_BACK_RECS, sizeof *s->back_buf);
    if (!s->q_buf || !s->back_buf) {
        gw_free(s->q_buf);
        gw_free(s->back_buf);
        s->q_buf = NULL;
        s->back_buf = NULL;
        return GW_E_NOMEM;
    }
    ck_ring_init(&s->q, size);
    ck_ring_init(&s->back, STORE_BACK_RECS);
    return GW_OK;
}

enum gw_code
store_row_submit(struct store *s, const struct gw_row *row)
{
    struct store_rec *rec = rec_of(s, row);

    if (!rec || !q_mpsc_put(s, rec)) {
        gw_free(rec); /* only the writer gives records back */
        /* Workers add concurrently; relaxed: readers only need the count itself. */
        atomic_fetch_add_explicit(&s->rows_dropped, 1, memory_order_relaxed);
        return rec ? GW_E_STORE_QUEUE_FULL : GW_E_NOMEM;
    }
    atomic_fetch_add(&s->rows_queued, 1);
    return GW_OK;
}

/* ---- batches ---- */

/* Counts <n> dropped rows; returns the new total (for the message). */
static uint64_t
drop(struct store *s, uint64_t n)
{
    return atomic_fetch_add_explicit(&s->rows_dropped, n, memory_order_relaxed) + n;
}

static void
report_write_error(struct store *s, int rc, uint64_t dropped)
{
    if (rc == MDB_MAP_FULL) {
        if (!s->map_full_logged)
            GW_LOG(GW_LOG_ERROR, NULL, "gw.store.io",
                   "store %s: map full (raise store.map_size_mb or lower "
                   "retention.row_days); dropping rows, counted in rows_dropped "
                   "(%llu now)",
                   s->path, (unsigned long long)dropped);
        s->map_full_logged = true;
        return;
    }
    if (!s->io_logged)
        GW_LOG(GW_LOG_ERROR, NULL, "gw.store.io",
               "store %s: write failed: %s; dropping rows, counted in rows_dropped", s->path,
               mdb_strerror(rc));
    s->io_logged = true;
}

/* A put through cursor <c> of a key that usually sorts after every key of its tree
 * (rows come mostly in the order they began, and keys start with that time): appended
 * without the page search when it does, put in its place when not (MDB_APPEND refuses
 * a key that does not sort last with MDB_KEYEXIST). The batch keeps one cursor a tree,
 * so an append finds the last page where the put before it left the cursor rather
 * than searching from the root again (mdb_put opens a cursor each call). */
static int
put_in_order(MDB_cursor *c, MDB_val *k, MDB_val *v, unsigned flags)
{
    int rc = mdb_cursor_put(c, k, v, flags | MDB_APPEND);

    return rc == MDB_KEYEXIST ? mdb_cursor_put(c, k, v, flags) : rc;
}

/* The batch's cursors on rows and by_client; LMDB closes them when <txn> ends. */
static int
batch_cursors(struct store *s, MDB_txn *txn, MDB_cursor **rows, MDB_cursor **by_client)
{
    int rc = mdb_cursor_open(txn, s->dbi_rows, rows);

    return rc != 0 ? rc : mdb_cursor_open(txn, s->dbi_by_client, by_client);
}

static int
put_row(MDB_cursor *rows, MDB_cursor *by_client, const struct store_rec *rec, uint64_t seq)
{
    unsigned char rowkey[STORE_ROW_KEY_LEN];
    unsigned char ckey[STORE_CLIENT_KEY_MAX];
    char client[GW_NAME_MAX + 1];
    MDB_val k, v;
    int rc;

    if (!store_row_decode_client(rec->enc, rec->len, client))
        return MDB_BAD_VALSIZE; /* cannot happen: store_row_encode wrote it */
    store_row_key(rowkey, rec->ts_ms, seq);
    k.mv_size = sizeof rowkey;
    k.mv_data = rowkey;
    v.mv_size = rec->len;
    v.mv_data = (void *)(uintptr_t)rec->enc;
    if ((rc = put_in_order(rows, &k, &v, MDB_NOOVERWRITE)) != 0)
        return rc;
    k.mv_size = store_client_key(ckey, client, rowkey);
    k.mv_data = ckey;
    v.mv_size = 0;
    v.mv_data = NULL;
    return put_in_order(by_client, &k, &v, 0);
}

static void
report_resp_error(struct store *s, int rc)
{
    if (!s->resp_logged)
        GW_LOG(GW_LOG_ERROR, NULL, "gw.store.io",
               "store %s: cannot write Responses conversations: %s%s; dropping them "
               "(the rows of the batch are kept), counted in resp_dropped",
               s->path, mdb_strerror(rc),
               rc == MDB_MAP_FULL ? " (raise store.map_size_mb or lower retention.row_days)" : "");
    s->resp_logged = true;
}

/* Takes up to <max> queued rows (their records) and the queued responses (up to
 * STORE_RESP_BATCH_BYTES) and commits them in one write transaction, so responses cost
 * no sync of their own. On a failed transaction, what was taken is dropped and counted;
 * responses that fail alone (store_resp_write) are dropped without the rows. Returns
 * true when it stopped before finding both queues empty, so more may be waiting. */
static bool
commit_batch(struct store *s, unsigned max)
{
    MDB_txn *txn;
    MDB_cursor *rows, *by_client;
    MDB_val k = {.mv_size = 3, .mv_data = (void *)(uintptr_t) "seq"};
    MDB_val v;
    unsigned char seqbuf[8];
    struct store_rec *rec;
    struct store_resp *resp;
    uint64_t seq0 = s->seq;
    unsigned n = 0;
    bool more = false, resp_more = false, resp_ok = false;
    int rc;

    rec = q_mpsc_take(s);
    resp = store_resp_take(s, STORE_RESP_BATCH_BYTES, &resp_more);
    if (!rec && !resp)
        return false;
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc == 0 && (rc = batch_cursors(s, txn, &rows, &by_client)) != 0)
        mdb_txn_abort(txn);
    if (rc != 0) {
        if (rec) {
            back_put(s, rec);
            report_write_error(s, rc, drop(s, 1));
            atomic_fetch_add(&s->rows_handled, 1);
        }
        store_resp_settle(s, resp, false);
        return true;
    }
    while (rec) {
        n++;
        rc = put_row(rows, by_client, rec, ++s->seq);
        back_put(s, rec); /* LMDB holds a copy now */
        if (rc != 0 || n >= max) {
            more = true;
            break;
        }
        rec = q_mpsc_take(s);
    }
    if (rc == 0 && n > 0) {
        store_be64_put(seqbuf, s->seq);
        v.mv_size = sizeof seqbuf;
        v.mv_data = seqbuf;
        rc = mdb_put(txn, s->dbi_meta, &k, &v, 0);
    }
    if (rc == 0 && resp) {
        int rrc = store_resp_write(s, txn, resp);

        resp_ok = rrc == 0;
        if (!resp_ok)
            report_resp_error(s, rrc);
    }
    uint64_t t0 = mono_us();

    if (rc == 0)
        rc = mdb_txn_commit(txn); /* frees txn, also on failure */
    else
        mdb_txn_abort(txn);
    if (rc != 0) {
        s->seq = seq0; /* nothing of this batch was written */
        if (n > 0)
            report_write_error(s, rc, drop(s, n));
        else if (resp_ok)
            report_resp_error(s, rc);
        atomic_fetch_add(&s->rows_handled, n);
        store_resp_settle(s, resp, false);
        return more || resp_more;
    }
    /* Counts only (relaxed); store_stats_get reads them on any thread. */
    atomic_fetch_add_explicit(&s->rows_committed, n, memory_order_relaxed);
    if (n > 0 || resp_ok) { /* not a transaction left empty by failed responses */
        atomic_fetch_add_explicit(&s->batches, 1, memory_order_relaxed);
        note_batch(s, n, mono_us() - t0);
    }
    atomic_fetch_add(&s->rows_handled, n);
    /* Only now, after the commit, do the responses leave the table (store/resp.c). */
    store_resp_settle(s, resp, resp_ok);
    return more || resp_more;
}

void
store_q_fini(struct store *s)
{
    struct store_rec *rec;
    unsigned cap = ck_ring_capacity(&s->q);

    if (!s->q_buf)
        return;
    if (s->env) {
        /* Rows and responses queued after the writer stopped: commit rather than lose
         * them. */
        while (commit_batch(s, cap))
            ;
    }
    while ((rec = q_mpsc_take(s)) != NULL) {
        gw_free(rec);
        drop(s, 1);
    }
    gw_free(s->q_buf);
    s->q_buf = NULL;
    while ((rec = back_take(s)) != NULL)
        gw_free(rec);
    gw_free(s->back_buf);
    s->back_buf = NULL;
}

/* ---- retention ---- */

enum gw_code
store_prune_chunk(struct store *s, uint64_t cutoff_ms, unsigned max, bool *more, uint64_t *n)
{
    unsigned char ckey[STORE_CLIENT_KEY_MAX];
    char client[GW_NAME_MAX + 1];
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v, dk;
    unsigned count = 0;
    int rc;

    *more = false;
    if (mdb_txn_begin(s->env, NULL, 0, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_cursor_open(txn, s->dbi_rows, &c) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        /* Keys start with be64 ts_ms, so the oldest rows come first. */
        if (k.mv_size >= 8 && store_be64_get(k.mv_data) >= cutoff_ms)
            break;
        if (count == max) {
            *more = true;
            break;
        }
        if (k.mv_size == STORE_ROW_KEY_LEN &&
            store_row_decode_client(v.mv_data, v.mv_size, client)) {
            dk.mv_size = store_client_key(ckey, client, k.mv_data);
            dk.mv_data = ckey;
            rc = mdb_del(txn, s->dbi_by_client, &dk, NULL);
            if (rc != 0 && rc != MDB_NOTFOUND)
                break;
        }
        /* After a delete the cursor's next MDB_NEXT returns the following key. */
        if ((rc = mdb_cursor_del(c, 0)) != 0)
            break;
        count++;
    }
    mdb_cursor_close(c);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        *more = false;
        return GW_E_STORE_IO;
    }
    if (mdb_txn_commit(txn) != 0) {
        *more = false;
        return GW_E_STORE_IO;
    }
    atomic_fetch_add_explicit(&s->rows_pruned, count, memory_order_relaxed);
    if (n)
        *n += count;
    return GW_OK;
}

enum gw_code
store_prune(struct store *s, uint64_t now_ms, unsigned row_days, uint64_t *n)
{
    uint64_t span = (uint64_t)row_days * STORE_DAY_MS;
    enum gw_code code;
    bool more = true;

    if (row_days == 0 || now_ms <= span)
        return GW_OK;
    while (more) {
        code = store_prune_chunk(s, now_ms - span, STORE_PRUNE_CHUNK, &more, n);
        if (code != GW_OK)
            return code;
    }
    more = true;
    while (more) {
        code = store_resp_prune_chunk(s, now_ms - span, STORE_RESP_PRUNE_CHUNK, &more, n);
        if (code != GW_OK)
            return code;
    }
    return GW_OK;
}

/* ---- the writer thread ---- */

static uint64_t
clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
report_prune_error(struct store *s)
{
    if (!s->io_logged)
        GW_LOG(GW_LOG_ERROR, NULL, "gw.store.io", "store %s: retention failed; retrying in an hour",
               s->path);
    s->io_logged = true;
}

static void *
writer_main(void *arg)
{
    struct store *s = arg;
    unsigned cap = ck_ring_capacity(&s->q);
    uint64_t span = (uint64_t)s->row_days * STORE_DAY_MS;
    uint64_t next_prune = clock_ms(CLOCK_MONOTONIC); /* prune at start */
    uint64_t cutoff = 0;
    bool prune_rows = false, prune_resp = false;
    bool busy, stop;
    struct timespec until;
    uint64_t wake;

    pthread_setname_np(pthread_self(), "gw-store");
    for (;;) {
        /* the next turn starts batch_ms after this one started, not after it ended, so
         * commits are batch_ms apart, not batch_ms and a commit's own time */
        wake = clock_ms(CLOCK_MONOTONIC) + s->batch_ms;
        busy = commit_batch(s, cap); /* more may be waiting: no sleep */
        store_learned_commit(s);     /* learned quota limits, when any were put */
        if (s->row_days != 0 && !prune_rows && !prune_resp &&
            clock_ms(CLOCK_MONOTONIC) >= next_prune) {
            uint64_t now = clock_ms(CLOCK_REALTIME);

            next_prune = clock_ms(CLOCK_MONOTONIC) + STORE_PRUNE_EVERY_MS;
            if (now > span) {
                cutoff = now - span;
                prune_rows = prune_resp = true;
            }
        }
        /* One bounded transaction per turn so commits keep their pace: rows first, then
         * responses (a failed chunk ends its kind's run until the next hour). */
        if (prune_rows) {
            if (store_prune_chunk(s, cutoff, STORE_PRUNE_CHUNK, &prune_rows, NULL) != GW_OK)
                report_prune_error(s);
        } else if (prune_resp) {
            if (store_resp_prune_chunk(s, cutoff, STORE_RESP_PRUNE_CHUNK, &prune_resp, NULL) !=
                GW_OK)
                report_prune_error(s);
        }
        busy = busy || prune_rows || prune_resp;
        pthread_mutex_lock(&s->mu);
        if (s->sync_waiters > 0)
            pthread_cond_broadcast(&s->done_cv);
        /* A store_sync caller is served at once rather than after the next batch_ms. */
        if (!s->stop && !busy && s->sync_waiters == 0) {
            until.tv_sec = (time_t)(wake / 1000);
            until.tv_nsec = (long)(wake % 1000) * 1000000;
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
        }
        stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
    }
    /* Everything queued before store_writer_stop: stop once a batch found the queues
     * empty (each turn takes rows or responses, so this ends even when every commit
     * fails). */
    while (commit_batch(s, cap))
        ;
    return NULL;
}

enum gw_code
store_writer_start(struct store *s, unsigned batch_ms, unsigned row_days)
{
    sigset_t all, old;
    int rc;

    if (s->writer_running)
        return GW_E_INTERNAL;
    s->batch_ms = batch_ms ? batch_ms : 1;
    s->row_days = row_days;
    s->stop = false; /* no writer yet: nobody else reads it */
    /* Signals belong to main: the writer starts with all of them blocked. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->writer, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, "gw store %s: cannot start the writer thread: %s\n", s->path, strerror(rc));
        return GW_E_STORE_IO;
    }
    s->writer_running = true;
    return GW_OK;
}

/* true when the writer has handled everything queued up to the targets. */
static bool
sync_reached(struct store *s, uint64_t rows, uint64_t resp)
{
    return atomic_load(&s->rows_handled) >= rows && atomic_load(&s->resp_handled) >= resp;
}

bool
store_sync(struct store *s, unsigned timeout_ms)
{
    const uint64_t rows = atomic_load(&s->rows_queued);
    const uint64_t resp = atomic_load(&s->resp_queued);
    const uint64_t deadline = clock_ms(CLOCK_MONOTONIC) + timeout_ms;
    struct timespec until = {.tv_sec = (time_t)(deadline / 1000),
                             .tv_nsec = (long)(deadline % 1000) * 1000000};
    bool done;

    pthread_mutex_lock(&s->mu);
    s->sync_waiters++;
    pthread_cond_signal(&s->cv);
    while (!(done = sync_reached(s, rows, resp)))
        if (pthread_cond_timedwait(&s->done_cv, &s->mu, &until) == ETIMEDOUT) {
            done = sync_reached(s, rows, resp);
            break;
        }
    s->sync_waiters--;
    pthread_mutex_unlock(&s->mu);
    return done;
}

void
store_writer_stop(struct store *s)
{
    if (!s->writer_running)
        return;
    /* The writer checks <stop> under mu after each turn, so this signal cannot be lost. */
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->writer, NULL);
    s->writer_running = false;
}
