/* SPDX-License-Identifier: MIT
 * store/resp.c - the conversations of OpenAI Responses answers kept for
 * previous_response_id (DESIGN.md 11; the one stated exception to "bodies are not
 * stored", DESIGN.md 13): the input and output items of a response, as JSON text, with
 * the provider and upstream shape that made it.
 * LMDB: "responses" maps the response id (the bytes the client saw, 1..128) to a value
 * of a small versioned head and the items (store/codec.c); "responses_by_ts" maps
 * be64 ts_ms | id to nothing, so retention walks the oldest first and stops at the
 * cutoff. Why an index rather than a scan of "responses": a value above about 2 KiB
 * lives in LMDB overflow pages, so reading each one's ts would touch a page of every
 * stored response at every hourly run; the index costs 8 + id bytes a response and a
 * prune reads only what it deletes.
 * Large values: a response of several MB is one value, written into a run of contiguous
 * overflow pages (one dirty-list entry in the transaction, however long). Pruned runs go
 * back to LMDB's free list; a new value reuses them only where a long enough run is
 * free, otherwise the file grows towards the map size (store.map_size_mb), which bounds
 * rows and responses together. A write that does not fit (MDB_MAP_FULL) drops the
 * responses of that batch, never its rows: they are written in a nested transaction.
 * Visibility before commit: a client gets response.completed and may send the next turn
 * at once, before the batch holding that response commits (up to batch_ms later). So a
 * put enters a table in memory (256 buckets of chains, under resp_mu) and the writer's
 * queue; store_resp_get looks there first. The writer takes entries off the queue,
 * writes them, and removes them from the table only after the transaction committed;
 * a get that misses the table therefore begins its read transaction after that commit.
 * resp_mu is held for pointer updates only: the copy of the items happens before a put
 * takes it, and a get copies an entry out after taking a reference and letting go.
 * Owns:    every response from put until the writer settles it (the table's reference).
 * Threads: put and get on any thread (workers); take, write, settle and the prune on
 *          the writer thread (or main once it stopped, and tests).
 * See:     store/store.h, store/store-priv.h, store/writer.c, store/codec.c,
 *          tests/unit/store/test_resp.c
 */
#include "store/store-priv.h"

#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/assert.h"

/* ---- the pending table ---- */

/* FNV-1a: ids are short and the table small; any spread will do. */
static uint64_t
id_hash(const char *id, size_t len)
{
    uint64_t h = 14695981039346656037ull;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)id[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct store_resp **
bucket(struct store *s, uint64_t hash)
{
    return &s->resp_tab[hash & (STORE_RESP_BUCKETS - 1)];
}

void
store_resp_unref(struct store_resp *r)
{
    /* acq_rel: the last owner's acquire sees every other owner's reads finished (they
     * released) before it frees. */
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
        gw_free(r);
}

/* The newest entry of <id> in the table with a reference taken for the caller, or NULL. */
static struct store_resp *
table_find(struct store *s, const char *id, size_t id_len)
{
    uint64_t h = id_hash(id, id_len);
    struct store_resp *r;

    pthread_mutex_lock(&s->resp_mu);
    for (r = *bucket(s, h); r; r = r->hnext)
        if (r->hash == h && r->id_len == id_len && memcmp(r->id, id, id_len) == 0)
            break;
    /* Relaxed: the table's reference keeps <r> alive while we hold resp_mu. */
    if (r)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->resp_mu);
    return r;
}

/* ---- put ---- */

static struct store_resp *
resp_new(const char *id, size_t id_len, const char *client, size_t clen, const char *provider,
         size_t plen, int shape, uint64_t ts_ms, const char *items, size_t len)
{
    unsigned char head[STORE_RESP_HEAD_MAX];
    size_t hlen = store_resp_head_encode(head, ts_ms, provider, plen, client, clen, shape, 0);
    struct store_resp *r = gw_malloc(sizeof *r + hlen + len);

    if (!r)
        return NULL;
    r->hnext = NULL;
    r->qnext = NULL;
    atomic_init(&r->refs, 1); /* the table's */
    r->hash = id_hash(id, id_len);
    r->ts_ms = ts_ms;
    r->id_len = id_len;
    r->len = hlen + len;
    memcpy(r->id, id, id_len);
    r->id[id_len] = '\0';
    memcpy(r->val, head, hlen);
    if (len)
        memcpy(r->val + hlen, items, len);
    return r;
}

static enum gw_code
put_refused(struct store *s, enum gw_code code)
{
    /* Workers add concurrently; relaxed: readers only need the count. */
    atomic_fetch_add_explicit(&s->resp_dropped, 1, memory_order_relaxed);
    return code;
}

enum gw_code
store_resp_put(struct store *s, const char *id, const char *client, const char *provider, int shape,
               uint64_t ts_ms, const char *items, size_t len)
{
    size_t id_len = strnlen(id, STORE_RESP_ID_MAX + 1);
    size_t clen = strnlen(client, GW_NAME_MAX + 1);
    size_t plen = strnlen(provider, GW_NAME_MAX + 1);
    struct store_resp *r, **b;

    if (id_len == 0 || id_len > STORE_RESP_ID_MAX || clen == 0 || clen > GW_NAME_MAX ||
        plen > GW_NAME_MAX || shape < 0 || shape > 255 || (!items && len))
        return GW_E_BAD_REQUEST;
    if (len > STORE_RESP_ITEMS_MAX)
        return put_refused(s, GW_E_BODY_TOO_LARGE);
    r = resp_new(id, id_len, client, clen, provider, plen, shape, ts_ms, items, len);
    if (!r)
        return put_refused(s, GW_E_NOMEM);
    pthread_mutex_lock(&s->resp_mu);
    if (s->resp_pending_bytes + r->len > s->resp_pending_max) {
        pthread_mutex_unlock(&s->resp_mu);
        gw_free(r);
        return put_refused(s, GW_E_STORE_QUEUE_FULL);
    }
    /* At the head of its chain: a get finds the newest put of an id first. */
    b = bucket(s, r->hash);
    r->hnext = *b;
    *b = r;
    *s->resp_qtail = r;
    s->resp_qtail = &r->qnext;
    s->resp_pending_bytes += r->len;
    /* Counted before the writer can take the entry (it takes resp_mu), so resp_handled
     * never runs ahead of it; seq-cst as store_sync compares the two. */
    atomic_fetch_add(&s->resp_queued, 1);
    pthread_mutex_unlock(&s->resp_mu);
    atomic_fetch_add_explicit(&s->resp_puts, 1, memory_order_relaxed);
    return GW_OK;
}

/* ---- get ---- */

/* Copies the value <val> (<len> bytes) out: provider, shape, items; GW_E_NOT_FOUND when
 * it is not <client>'s (made under a name <client> never had, or before responses had
 * an owner), as if it were not there. <txn> is the read transaction <val> lies in, or
 * NULL for a value in memory. */
static enum gw_code
copy_out(struct store *s, MDB_txn *txn, const unsigned char *val, size_t len, const char *client,
         char *provider, int *shape, struct gw_buf *items)
{
    char owner[GW_NAME_MAX + 1];
    size_t off;

    if (!store_resp_head_decode(val, len, NULL, provider, owner, shape, NULL, &off))
        return GW_E_STORE_IO;
    if (strcmp(owner, client) != 0 && (!owner[0] || !store_client_was(s, txn, client, owner)))
        return GW_E_NOT_FOUND;
    return gw_buf_append(items, val + off, len - off);
}

enum gw_code
store_resp_get(struct store *s, const char *id, const char *client, char provider[GW_NAME_MAX + 1],
               int *shape, struct gw_buf *items)
{
    size_t id_len = strnlen(id, STORE_RESP_ID_MAX + 1);
    struct store_resp *r;
    enum gw_code code;
    MDB_txn *txn;
    MDB_val k, v;
    int rc;

    gw_buf_reset(items);
    provider[0] = '\0';
    if (id_len == 0 || id_len > STORE_RESP_ID_MAX)
        return GW_E_NOT_FOUND; /* no put accepts such an id */
    r = table_find(s, id, id_len);
    if (r) {
        code = copy_out(s, NULL, r->val, r->len, client, provider, shape, items);
        store_resp_unref(r);
    } else {
        /* Begun after the table lookup: a response that had left the table is committed
         * (the writer removes entries only after their commit), so this sees it. */
        if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
            return GW_E_STORE_IO;
        k.mv_size = id_len;
        k.mv_data = (void *)(uintptr_t)id;
        rc = mdb_get(txn, s->dbi_resp, &k, &v);
        if (rc == 0)
            code = copy_out(s, txn, v.mv_data, v.mv_size, client, provider, shape,
                            items); /* before the end */
        else
            code = rc == MDB_NOTFOUND ? GW_E_NOT_FOUND : GW_E_STORE_IO;
        mdb_txn_abort(txn);
    }
    if (code != GW_OK) {
        gw_buf_reset(items);
        provider[0] = '\0';
    }
    return code;
}

/* ---- the writer's side ---- */

struct store_resp *
store_resp_take(struct store *s, size_t max_bytes, bool *more)
{
    struct store_resp *first, *last, *r;
    size_t bytes;

    *more = false;
    pthread_mutex_lock(&s->resp_mu);
    first = s->resp_qhead;
    if (!first) {
        pthread_mutex_unlock(&s->resp_mu);
        return NULL;
    }
    last = first;
    bytes = first->len;
    while (last->qnext && bytes + last->qnext->len <= max_bytes) {
        last = last->qnext;
        bytes += last->len;
    }
    r = last->qnext;
    last->qnext = NULL; /* ends the taken list */
    s->resp_qhead = r;
    if (!r)
        s->resp_qtail = &s->resp_qhead;
    *more = r != NULL;
    pthread_mutex_unlock(&s->resp_mu);
    return first;
}

/* Puts one response into <txn>, replacing an earlier one of the same id together with
 * its index entry. A new id (nearly every put) costs one search of the tree: the put
 * that does not overwrite finds an earlier value where it would insert. */
static int
write_one(struct store *s, MDB_txn *txn, const struct store_resp *r)
{
    unsigned char tkey[STORE_RESP_TS_KEY_MAX];
    MDB_val k = {.mv_size = r->id_len, .mv_data = (void *)(uintptr_t)r->id};
    MDB_val v = {.mv_size = r->len, .mv_data = (void *)(uintptr_t)r->val};
    MDB_val tk, empty = {.mv_size = 0, .mv_data = NULL};
    uint64_t old_ts;
    int rc;

    rc = mdb_put(txn, s->dbi_resp, &k, &v, MDB_NOOVERWRITE);
    if (rc == MDB_KEYEXIST) {
        /* <v> is the earlier value, in the map: its index entry goes first */
        if (store_resp_head_decode(v.mv_data, v.mv_size, &old_ts, NULL, NULL, NULL, NULL, NULL)) {
            tk.mv_size = store_resp_ts_key(tkey, old_ts, r->id, r->id_len);
            tk.mv_data = tkey;
            rc = mdb_del(txn, s->dbi_resp_ts, &tk, NULL);
            if (rc != 0 && rc != MDB_NOTFOUND)
                return rc;
        }
        v.mv_size = r->len;
        v.mv_data = (void *)(uintptr_t)r->val;
        rc = mdb_put(txn, s->dbi_resp, &k, &v, 0);
    }
    if (rc != 0)
        return rc;
    tk.mv_size = store_resp_ts_key(tkey, r->ts_ms, r->id, r->id_len);
    tk.mv_data = tkey;
    return mdb_put(txn, s->dbi_resp_ts, &tk, &empty, 0);
}

int
store_resp_write(struct store *s, MDB_txn *txn, struct store_resp *list)
{
    MDB_txn *child;
    int rc;

    /* Nested: a failure (MDB_MAP_FULL) marks only the child as failed; aborting it puts
     * <txn> back as it was, so the batch's rows still commit. A child commit merges into
     * <txn> and costs no sync of its own. */
    if ((rc = mdb_txn_begin(s->env, txn, 0, &child)) != 0)
        return rc;
    for (const struct store_resp *r = list; r && rc == 0; r = r->qnext)
        rc = write_one(s, child, r);
    if (rc == 0)
        return mdb_txn_commit(child); /* frees <child>, also on failure */
    mdb_txn_abort(child);
    return rc;
}

void
store_resp_settle(struct store *s, struct store_resp *list, bool committed)
{
    struct store_resp *r, *next, **pp;
    uint64_t n = 0;

    if (!list)
        return;
    pthread_mutex_lock(&s->resp_mu);
    for (r = list; r; r = r->qnext) {
        for (pp = bucket(s, r->hash); *pp != r; pp = &(*pp)->hnext)
            GW_ASSERT(*pp != NULL); /* every taken entry is in the table */
        *pp = r->hnext;
        s->resp_pending_bytes -= r->len;
        n++;
    }
    pthread_mutex_unlock(&s->resp_mu);
    for (r = list; r; r = next) {
        next = r->qnext; /* read before the unref may free <r> */
        store_resp_unref(r);
    }
    /* Counts only (relaxed), then handled (seq-cst) for store_sync. */
    atomic_fetch_add_explicit(committed ? &s->resp_committed : &s->resp_dropped, n,
                              memory_order_relaxed);
    atomic_fetch_add(&s->resp_handled, n);
}

void
store_resp_fini(struct store *s)
{
    struct store_resp *list;
    bool more = true;

    /* Whatever is still queued (the environment failed to open): settled as dropped. */
    while (more && (list = store_resp_take(s, SIZE_MAX, &more)) != NULL)
        store_resp_settle(s, list, false);
}

/* ---- retention ---- */

enum gw_code
store_resp_prune_chunk(struct store *s, uint64_t cutoff_ms, unsigned max, bool *more, uint64_t *n)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v, ik, iv;
    uint64_t ts;
    unsigned count = 0, walked = 0;
    int rc;

    *more = false;
    if (mdb_txn_begin(s->env, NULL, 0, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_cursor_open(txn, s->dbi_resp_ts, &c) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        /* Keys start with be64 ts_ms: the oldest responses come first. */
        if (k.mv_size < 8 || store_be64_get(k.mv_data) >= cutoff_ms)
            break;
        if (walked == max) {
            *more = true;
            break;
        }
        walked++;
        ik.mv_size = k.mv_size - 8;
        ik.mv_data = (unsigned char *)k.mv_data + 8;
        /* The response goes unless a later put of its id replaced it (its own ts is then
         * newer and its own index entry keeps it); a value that does not decode goes too.
         * Reading the head touches the first page of the value, nothing more. */
        rc = mdb_get(txn, s->dbi_resp, &ik, &iv);
        if (rc == 0 &&
            (!store_resp_head_decode(iv.mv_data, iv.mv_size, &ts, NULL, NULL, NULL, NULL, NULL) ||
             ts < cutoff_ms)) {
            if ((rc = mdb_del(txn, s->dbi_resp, &ik, NULL)) != 0)
                break;
            count++;
        } else if (rc != 0 && rc != MDB_NOTFOUND) {
            break;
        }
        /* After a delete the cursor's next MDB_NEXT returns the following key. */
        if ((rc = mdb_cursor_del(c, 0)) != 0)
            break;
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
    atomic_fetch_add_explicit(&s->resp_pruned, count, memory_order_relaxed);
    if (n)
        *n += count;
    return GW_OK;
}
