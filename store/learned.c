/* SPDX-License-Identifier: MIT
 * store/learned.c - limits upstreams stated about their credentials' quotas (DESIGN.md
 * 10, issue 11: "a learned limit ... is kept in the store across restarts"), in the
 * database `quota_learned`:
 *   key    provider | NUL | model | NUL | fingerprint | NUL | window (one byte)
 *   value  be64 limit | be64 at_ms | origin bytes (no NUL)
 * A put goes into a small pending table (learned_mu, held for a copy, no I/O) that the
 * writer thread commits on its next turn in its own transaction (the writer stays the
 * only writer); a later put of the same key replaces the pending one. Reads take their
 * own read transaction on any thread.
 * Owns:    the pending table.
 * Threads: put on any thread; commit on the writer (or main at close); each on any thread.
 * See:     store/store.h, net/quota.c
 */
#include "store/store-priv.h"

#include <string.h>

#include "core/log.h"

/* The key of <l> into <k> (STORE_LEARNED_KEY_MAX bytes); its length. */
static size_t
learned_key(const struct store_learned *l, unsigned char *k)
{
    size_t n = 0, len;

    len = strnlen(l->provider, GW_NAME_MAX);
    memcpy(k + n, l->provider, len);
    n += len;
    k[n++] = '\0';
    len = strnlen(l->model, GW_MODEL_MAX);
    memcpy(k + n, l->model, len);
    n += len;
    k[n++] = '\0';
    len = strnlen(l->fp, sizeof(l->fp) - 1);
    memcpy(k + n, l->fp, len);
    n += len;
    k[n++] = '\0';
    k[n++] = (unsigned char)l->win;
    return n;
}

enum gw_code
store_learned_put(struct store *s, const struct store_learned *l)
{
    size_t i;
    enum gw_code rc = GW_OK;

    pthread_mutex_lock(&s->learned_mu);
    for (i = 0; i < s->n_learned; i++) {
        const struct store_learned *p = &s->learned[i];

        if (p->win == l->win && strcmp(p->provider, l->provider) == 0 &&
            strcmp(p->model, l->model) == 0 && strcmp(p->fp, l->fp) == 0)
            break;
    }
    if (i < STORE_LEARNED_PENDING) {
        s->learned[i] = *l;
        if (i == s->n_learned)
            s->n_learned++;
    } else {
        rc = GW_E_STORE_QUEUE_FULL; /* the writer is behind: the next save tries again */
    }
    pthread_mutex_unlock(&s->learned_mu);
    return rc;
}

void
store_learned_commit(struct store *s)
{
    struct store_learned batch[STORE_LEARNED_PENDING];
    unsigned char k[STORE_LEARNED_KEY_MAX], v[16 + STORE_LEARNED_ORIGIN_MAX];
    size_t n, i;
    MDB_txn *txn = NULL;
    int rc;

    pthread_mutex_lock(&s->learned_mu);
    n = s->n_learned;
    memcpy(batch, s->learned, n * sizeof(batch[0]));
    s->n_learned = 0;
    pthread_mutex_unlock(&s->learned_mu);
    if (!n || !s->env)
        return;
    rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    for (i = 0; rc == 0 && i < n; i++) {
        size_t olen = strnlen(batch[i].origin, STORE_LEARNED_ORIGIN_MAX);
        MDB_val kv = {learned_key(&batch[i], k), k}, vv = {16 + olen, v};

        store_be64_put(v, batch[i].limit);
        store_be64_put(v + 8, batch[i].at_ms);
        memcpy(v + 16, batch[i].origin, olen);
        rc = mdb_put(txn, s->dbi_learned, &kv, &vv, 0);
    }
    if (rc == 0)
        rc = mdb_txn_commit(txn);
    else if (txn)
        mdb_txn_abort(txn);
    if (rc != 0)
        GW_LOG(GW_LOG_WARN, NULL, "gw.store.io", "store %s: learned quota limits not saved: %s",
               s->path, mdb_strerror(rc));
}

enum gw_code
store_learned_each(struct store *s, int (*fn)(void *arg, const struct store_learned *l), void *arg)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    int rc;

    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_cursor_open(txn, s->dbi_learned, &c) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const unsigned char *p = k.mv_data, *end = p + k.mv_size;
        char *dst[3];
        size_t cap[3], f, len;
        struct store_learned l;

        memset(&l, 0, sizeof(l));
        dst[0] = l.provider, cap[0] = sizeof(l.provider);
        dst[1] = l.model, cap[1] = sizeof(l.model);
        dst[2] = l.fp, cap[2] = sizeof(l.fp);
        for (f = 0; f < 3; f++) {
            const unsigned char *z = memchr(p, '\0', (size_t)(end - p));

            if (!z || (size_t)(z - p) >= cap[f])
                break;
            memcpy(dst[f], p, (size_t)(z - p));
            p = z + 1;
        }
        if (f < 3 || end - p != 1 || v.mv_size < 16)
            continue; /* not ours: skip */
        l.win = *p;
        l.limit = store_be64_get(v.mv_data);
        l.at_ms = store_be64_get((const unsigned char *)v.mv_data + 8);
        len = v.mv_size - 16 < STORE_LEARNED_ORIGIN_MAX ? v.mv_size - 16 : STORE_LEARNED_ORIGIN_MAX;
        memcpy(l.origin, (const unsigned char *)v.mv_data + 16, len);
        if (fn(arg, &l) != 0) {
            rc = MDB_NOTFOUND;
            break;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? GW_OK : GW_E_STORE_IO;
}
