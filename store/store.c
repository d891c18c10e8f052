/* SPDX-License-Identifier: MIT
 * store/store.c - the LMDB environment of gw: open/close, the schema version, reads.
 * One environment (MDB_NOTLS, so a read transaction may run on any thread) with these
 * named databases:
 *   meta       "schema" -> be32 version (STORE_SCHEMA_VERSION; a newer one is refused),
 *              "seq"    -> be64 last sequence number committed (kept even when retention
 *                          has deleted every row, so sequences never repeat)
 *   rows       be64 ts_ms | be64 seq -> encoded row (store/codec.c); ordered by request
 *              time, ties by sequence; seq is unique, so keys are unique
 *   by_client  client | NUL | be64 ts_ms | be64 seq -> empty; the key's tail is the rows
 *              key, so a per-client scan from a time is one range walk
 *   responses        response id -> head | items JSON (store/resp.c, store/codec.c)
 *   responses_by_ts  be64 ts_ms | response id -> empty (their retention, oldest first)
 *   quota_learned    provider | NUL | model | NUL | fp | NUL | window -> learned limit
 *                    (store/learned.c; created on open like the responses databases)
 * The two responses databases came after schema version 1 without raising it: they are
 * created on open when missing, and an older gw that opens the store leaves them alone
 * (so a rollback keeps working; it just does not prune them).
 * Page cursors: the <next> of store_rows_page is the rows key of the last row returned
 * (ts_ms and seq); the next call continues from the key before it. A cursor whose row
 * was pruned ends the listing (every older row is gone as well). Stores written before
 * this kept a by_seq database (be64 seq -> be64 ts_ms) so that a cursor could be the
 * sequence alone: a third write a row for paging only. It is deleted on open
 * (retire_by_seq), its last sequence kept in meta "seq" when that is higher; an older
 * gw opening the store again creates it empty and pages only its own rows' cursors.
 * The writer thread (store/writer.c) is the only writer; sequences are assigned there.
 * Every read opens and ends its own read transaction inside the call and copies the
 * rows out (decoded) before the transaction ends. Responses are read in store/resp.c.
 * Owns:    the environment, struct store.
 * Threads: open/close on main; reads and store_stats_get on any thread.
 * See:     store/store.h, store/store-priv.h, store/writer.c, store/codec.c
 */
#include "store/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/alloc.h"
#include "store/store-priv.h"

#define STORE_MAX_DBS 8
#define STORE_MIB ((size_t)1024 * 1024)

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- open ---- */

/* mkdir -p <path>; 0 or an errno. */
static int
mkdir_p(const char *path)
{
    char *buf = gw_strdup(path);
    struct stat st;
    int rc = 0;

    if (!buf)
        return ENOMEM;
    if (buf[0] == '\0') {
        gw_free(buf);
        return EINVAL;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;

        *p = '\0';
        if (mkdir(buf, 0750) != 0 && errno != EEXIST) {
            rc = errno;
            break;
        }
        *p = c;
        if (c == '\0')
            break;
    }
    gw_free(buf);
    if (rc == 0 && stat(path, &st) != 0)
        rc = errno;
    else if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = ENOTDIR;
    return rc;
}

static int
open_dbis(struct store *s, MDB_txn *txn)
{
    int rc;

    if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->dbi_meta)) != 0 ||
        (rc = mdb_dbi_open(txn, "rows", MDB_CREATE, &s->dbi_rows)) != 0 ||
        (rc = mdb_dbi_open(txn, "by_client", MDB_CREATE, &s->dbi_by_client)) != 0 ||
        (rc = mdb_dbi_open(txn, "responses", MDB_CREATE, &s->dbi_resp)) != 0 ||
        (rc = mdb_dbi_open(txn, "responses_by_ts", MDB_CREATE, &s->dbi_resp_ts)) != 0 ||
        (rc = mdb_dbi_open(txn, "quota_learned", MDB_CREATE, &s->dbi_learned)) != 0)
        return rc;
    return 0;
}

/* Checks the stored schema version, writing it into a fresh store. */
static enum gw_code
check_schema(struct store *s, MDB_txn *txn, char *err, size_t errlen)
{
    MDB_val k = {.mv_size = 6, .mv_data = (void *)(uintptr_t) "schema"};
    MDB_val v;
    MDB_stat st;
    unsigned char buf[4];
    uint32_t version;
    int rc;

    rc = mdb_get(txn, s->dbi_meta, &k, &v);
    if (rc == MDB_NOTFOUND) {
        rc = mdb_stat(txn, s->dbi_rows, &st);
        if (rc == 0 && st.ms_entries > 0) {
            set_err(err, errlen, "store %s: rows without a schema version; not a gw store",
                    s->path);
            return GW_E_STORE_IO;
        }
        buf[0] = 0, buf[1] = 0, buf[2] = 0, buf[3] = STORE_SCHEMA_VERSION;
        v.mv_size = sizeof buf;
        v.mv_data = buf;
        if (rc == 0)
            rc = mdb_put(txn, s->dbi_meta, &k, &v, 0);
        if (rc != 0) {
            set_err(err, errlen, "store %s: cannot write the schema version: %s", s->path,
                    mdb_strerror(rc));
            return GW_E_STORE_IO;
        }
        return GW_OK;
    }
    if (rc != 0) {
        set_err(err, errlen, "store %s: cannot read the schema version: %s", s->path,
                mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    if (v.mv_size != 4) {
        set_err(err, errlen, "store %s: unreadable schema version (%zu bytes)", s->path, v.mv_size);
        return GW_E_STORE_IO;
    }
    memcpy(buf, v.mv_data, 4);
    version = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
    if (version > STORE_SCHEMA_VERSION) {
        set_err(err, errlen,
                "store %s: schema version %u is newer than this gw supports (%u); "
                "run a newer gw or point store.path elsewhere",
                s->path, version, STORE_SCHEMA_VERSION);
        return GW_E_STORE_IO;
    }
    if (version < 1) {
        set_err(err, errlen, "store %s: invalid schema version %u", s->path, version);
        return GW_E_STORE_IO;
    }
    return GW_OK;
}

/* The last sequence used: meta "seq". */
static int
read_last_seq(struct store *s, MDB_txn *txn, uint64_t *seq)
{
    MDB_val k = {.mv_size = 3, .mv_data = (void *)(uintptr_t) "seq"};
    MDB_val v;
    int rc;

    *seq = 0;
    rc = mdb_get(txn, s->dbi_meta, &k, &v);
    if (rc == 0 && v.mv_size == 8)
        *seq = store_be64_get(v.mv_data);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Deletes the by_seq database of an older store (see the top), first raising <*seq> and
 * meta "seq" to its last key when that is higher, so that sequences never repeat. */
static int
retire_by_seq(struct store *s, MDB_txn *txn, uint64_t *seq)
{
    MDB_val k = {.mv_size = 3, .mv_data = (void *)(uintptr_t) "seq"};
    MDB_val last, v;
    unsigned char buf[8];
    MDB_cursor *c;
    MDB_dbi dbi;
    int rc;

    rc = mdb_dbi_open(txn, "by_seq", 0, &dbi);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc != 0 || (rc = mdb_cursor_open(txn, dbi, &c)) != 0)
        return rc;
    rc = mdb_cursor_get(c, &last, &v, MDB_LAST);
    if (rc == 0 && last.mv_size == 8 && store_be64_get(last.mv_data) > *seq) {
        *seq = store_be64_get(last.mv_data);
        store_be64_put(buf, *seq);
        v.mv_size = sizeof buf;
        v.mv_data = buf;
        rc = mdb_put(txn, s->dbi_meta, &k, &v, 0);
    }
    mdb_cursor_close(c);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return rc;
    return mdb_drop(txn, dbi, 1);
}

static enum gw_code
open_env(struct store *s, size_t map_size_mb, char *err, size_t errlen)
{
    MDB_txn *txn;
    enum gw_code code;
    int rc;

    if (map_size_mb == 0 || map_size_mb > SIZE_MAX / STORE_MIB) {
        set_err(err, errlen, "store %s: map size %zu MiB out of range", s->path, map_size_mb);
        return GW_E_STORE_IO;
    }
    rc = mkdir_p(s->path);
    if (rc != 0) {
        set_err(err, errlen, "store %s: cannot create the folder: %s", s->path, strerror(rc));
        return GW_E_STORE_IO;
    }
    if ((rc = mdb_env_create(&s->env)) != 0) {
        s->env = NULL;
        set_err(err, errlen, "store %s: %s", s->path, mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    if ((rc = mdb_env_set_maxdbs(s->env, STORE_MAX_DBS)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, map_size_mb * STORE_MIB)) != 0 ||
        (rc = mdb_env_open(s->env, s->path, MDB_NOTLS, 0640)) != 0) {
        set_err(err, errlen, "store %s: cannot open the LMDB environment: %s", s->path,
                mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
        set_err(err, errlen, "store %s: %s", s->path, mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    if ((rc = open_dbis(s, txn)) != 0) {
        mdb_txn_abort(txn);
        set_err(err, errlen, "store %s: cannot open the databases: %s", s->path, mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    code = check_schema(s, txn, err, errlen);
    if (code != GW_OK) {
        mdb_txn_abort(txn);
        return code;
    }
    if ((rc = read_last_seq(s, txn, &s->seq)) != 0 || (rc = retire_by_seq(s, txn, &s->seq)) != 0) {
        mdb_txn_abort(txn);
        set_err(err, errlen, "store %s: cannot read the last sequence: %s", s->path,
                mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        set_err(err, errlen, "store %s: %s", s->path, mdb_strerror(rc));
        return GW_E_STORE_IO;
    }
    return GW_OK;
}

enum gw_code
store_open_ring(const char *path, size_t map_size_mb, unsigned ring_size, struct store **out,
                char *err, size_t errlen)
{
    struct store *s;
    pthread_condattr_t ca;
    enum gw_code code;

    *out = NULL;
    if (ring_size < 4 || (ring_size & (ring_size - 1)) != 0) {
        set_err(err, errlen, "store: ring size %u is not a power of two >= 4", ring_size);
        return GW_E_STORE_IO;
    }
    s = gw_calloc(1, sizeof *s);
    if (!s) {
        set_err(err, errlen, "store: out of memory");
        return GW_E_NOMEM;
    }
    s->path = gw_strdup(path);
    if (!s->path || store_q_init(s, ring_size) != GW_OK) {
        set_err(err, errlen, "store: out of memory");
        gw_free(s->path);
        gw_free(s);
        return GW_E_NOMEM;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->resp_mu, NULL);
    pthread_mutex_init(&s->learned_mu, NULL);
    s->resp_qtail = &s->resp_qhead;
    s->resp_pending_max = STORE_RESP_PENDING_MAX;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the writer's timed waits */
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    code = open_env(s, map_size_mb, err, errlen);
    if (code != GW_OK) {
        store_close(s);
        return code;
    }
    *out = s;
    return GW_OK;
}

enum gw_code
store_open(const char *path, size_t map_size_mb, struct store **out, char *err, size_t errlen)
{
    return store_open_ring(path, map_size_mb, STORE_RING_SIZE, out, err, errlen);
}

void
store_close(struct store *s)
{
    if (!s)
        return;
    store_writer_stop(s); /* no-op when stopped, as the contract asks */
    store_q_fini(s);      /* commits rows and responses queued after the writer stopped */
    store_resp_fini(s);   /* what could not be committed (no environment) */
    store_learned_commit(s);
    if (s->env)
        mdb_env_close(s->env);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->done_cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->resp_mu);
    pthread_mutex_destroy(&s->learned_mu);
    gw_free(s->path);
    gw_free(s);
}

enum gw_code
store_schema_set(struct store *s, uint32_t version)
{
    MDB_val k = {.mv_size = 6, .mv_data = (void *)(uintptr_t) "schema"};
    unsigned char buf[4] = {(unsigned char)(version >> 24), (unsigned char)(version >> 16),
                            (unsigned char)(version >> 8), (unsigned char)version};
    MDB_val v = {.mv_size = sizeof buf, .mv_data = buf};
    MDB_txn *txn;

    if (mdb_txn_begin(s->env, NULL, 0, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_put(txn, s->dbi_meta, &k, &v, 0) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    return mdb_txn_commit(txn) == 0 ? GW_OK : GW_E_STORE_IO;
}

/* ---- reads ---- */

/* Positions <c> on the row just before (older than) the key of <cursor>. MDB_NOTFOUND
 * when there is none. */
static int
seek_before(MDB_cursor *c, const struct store_cursor *cursor, MDB_val *k, MDB_val *v)
{
    unsigned char rowkey[STORE_ROW_KEY_LEN];
    int rc;

    store_row_key(rowkey, cursor->ts_ms, cursor->seq);
    k->mv_size = sizeof rowkey;
    k->mv_data = rowkey;
    rc = mdb_cursor_get(c, k, v, MDB_SET_RANGE); /* first key >= the cursor's */
    if (rc == MDB_NOTFOUND)
        return mdb_cursor_get(c, k, v, MDB_LAST); /* every key is older */
    if (rc != 0)
        return rc;
    return mdb_cursor_get(c, k, v, MDB_PREV);
}

enum gw_code
store_rows_page(struct store *s, const struct store_cursor *cursor, struct gw_row *rows, size_t max,
                size_t *n, struct store_cursor *next)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    struct store_cursor last = {0};
    int rc;

    *n = 0;
    *next = (struct store_cursor){0};
    if (max == 0) {
        *next = *cursor;
        return GW_OK;
    }
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_cursor_open(txn, s->dbi_rows, &c) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    if (store_cursor_is_start(cursor))
        rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
    else
        rc = seek_before(c, cursor, &k, &v);
    while (rc == 0 && *n < max) {
        /* A row that does not decode (foreign or damaged bytes) is skipped. */
        if (k.mv_size == STORE_ROW_KEY_LEN && store_row_decode(v.mv_data, v.mv_size, &rows[*n])) {
            last.ts_ms = store_be64_get(k.mv_data);
            last.seq = store_be64_get((const unsigned char *)k.mv_data + 8);
            (*n)++;
        }
        rc = mdb_cursor_get(c, &k, &v, MDB_PREV);
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return GW_E_STORE_IO;
    if (rc == 0) /* stopped at <max> with an older row left */
        *next = last;
    return GW_OK;
}

/* The rows of the one name <client> in <txn>; 0, MDB_NOTFOUND (stopped by <fn> or no
 * more) or an LMDB error. */
static int
rows_of_name(struct store *s, MDB_txn *txn, const char *client, uint64_t since_ms,
             int (*fn)(void *arg, const struct gw_row *row), void *arg)
{
    unsigned char start[STORE_CLIENT_KEY_MAX];
    unsigned char rowkey[STORE_ROW_KEY_LEN];
    size_t plen = strlen(client) + 1; /* the name and its NUL */
    struct gw_row row;
    MDB_cursor *c;
    MDB_val k, v, rk, rv;
    int rc;

    if (plen > GW_NAME_MAX + 1)
        return 0; /* no such client can have rows */
    store_row_key(rowkey, since_ms, 0);
    k.mv_size = store_client_key(start, client, rowkey);
    k.mv_data = start;
    if ((rc = mdb_cursor_open(txn, s->dbi_by_client, &c)) != 0)
        return rc;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != plen + STORE_ROW_KEY_LEN || memcmp(k.mv_data, start, plen) != 0)
            break; /* past this client's keys */
        rk.mv_size = STORE_ROW_KEY_LEN;
        rk.mv_data = (unsigned char *)k.mv_data + plen;
        rc = mdb_get(txn, s->dbi_rows, &rk, &rv);
        if (rc == MDB_NOTFOUND)
            continue; /* an index entry left by a damaged row: skip */
        if (rc != 0)
            break;
        if (!store_row_decode(rv.mv_data, rv.mv_size, &row))
            continue;
        /* <row> is a copy: <fn> may keep nothing that points into the map. */
        if (fn(arg, &row) != 0) {
            rc = MDB_NOTFOUND;
            break;
        }
    }
    mdb_cursor_close(c);
    return rc == 0 ? MDB_NOTFOUND : rc;
}

/* ---- renamed clients ----
 * meta "renamed/<name>" holds the names <name> was renamed from, each with its NUL,
 * older renames included, so one read finds them all. */

#define STORE_RENAMED_PREFIX "renamed/"
#define STORE_RENAMED_MAX 32 /* names kept per client */

static size_t
renamed_key(char *buf, const char *name)
{
    return (size_t)snprintf(buf, sizeof(STORE_RENAMED_PREFIX) + GW_NAME_MAX + 1, "%s%s",
                            STORE_RENAMED_PREFIX, name);
}

/* Whether <list> (<len> bytes of NUL-ended names) holds the <l> bytes of <name>. */
static bool
renamed_has(const char *list, size_t len, const char *name, size_t l)
{
    for (size_t j = 0; j < len; j += strnlen(list + j, len - j) + 1)
        if (strnlen(list + j, len - j) == l && memcmp(list + j, name, l) == 0)
            return true;
    return false;
}

/* Appends the names of value <v> to <list> (<*len> bytes used of <cap>, <*n> names)
 * unless already there or equal to <self>. */
static void
renamed_merge(char *list, size_t cap, size_t *len, unsigned *n, const char *names, size_t vlen,
              const char *self)
{
    size_t i = 0;

    while (i < vlen && *n < STORE_RENAMED_MAX) {
        const char *nm = names + i;
        size_t l = strnlen(nm, vlen - i);
        bool dup =
            (strlen(self) == l && memcmp(self, nm, l) == 0) || renamed_has(list, *len, nm, l);

        if (!dup && l > 0 && *len + l + 1 <= cap) {
            memcpy(list + *len, nm, l);
            list[*len + l] = '\0';
            *len += l + 1;
            (*n)++;
        }
        i += l + 1;
    }
}

/* Appends to <list> (as renamed_merge) the names <name> was renamed from, read in
 * <txn>. */
static void
renamed_read(struct store *s, MDB_txn *txn, const char *name, char *list, size_t cap, size_t *len,
             unsigned *n, const char *self)
{
    char kbuf[sizeof(STORE_RENAMED_PREFIX) + GW_NAME_MAX + 1];
    MDB_val k = {.mv_size = renamed_key(kbuf, name), .mv_data = kbuf}, v;

    if (mdb_get(txn, s->dbi_meta, &k, &v) == 0) /* copied: the txn's pages are read-only */
        renamed_merge(list, cap, len, n, v.mv_data, v.mv_size, self);
}

enum gw_code
store_client_renamed(struct store *s, const char *old_name, const char *new_name)
{
    char kbuf[sizeof(STORE_RENAMED_PREFIX) + GW_NAME_MAX + 1];
    char list[STORE_RENAMED_MAX * (GW_NAME_MAX + 1)];
    size_t len = 0;
    unsigned n = 0;
    MDB_val k, v;
    MDB_txn *txn;

    if (strlen(old_name) > GW_NAME_MAX || strlen(new_name) > GW_NAME_MAX ||
        strcmp(old_name, new_name) == 0)
        return GW_E_BAD_REQUEST;
    if (mdb_txn_begin(s->env, NULL, 0, &txn) != 0)
        return GW_E_STORE_IO;
    renamed_read(s, txn, new_name, list, sizeof(list), &len, &n, new_name);
    renamed_merge(list, sizeof(list), &len, &n, old_name, strlen(old_name) + 1, new_name);
    renamed_read(s, txn, old_name, list, sizeof(list), &len, &n, new_name);
    k.mv_data = kbuf;
    k.mv_size = renamed_key(kbuf, new_name);
    v.mv_data = list;
    v.mv_size = len;
    if (mdb_put(txn, s->dbi_meta, &k, &v, 0) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    return mdb_txn_commit(txn) == 0 ? GW_OK : GW_E_STORE_IO;
}

bool
store_client_was(struct store *s, MDB_txn *txn, const char *client, const char *old)
{
    char list[STORE_RENAMED_MAX * (GW_NAME_MAX + 1)];
    size_t len = 0, olen = strlen(old);
    unsigned n = 0;
    MDB_txn *own = NULL;

    if (strlen(client) > GW_NAME_MAX || olen == 0 || olen > GW_NAME_MAX)
        return false;
    if (!txn && mdb_txn_begin(s->env, NULL, MDB_RDONLY, &own) != 0)
        return false;
    renamed_read(s, txn ? txn : own, client, list, sizeof(list), &len, &n, client);
    if (own)
        mdb_txn_abort(own);
    return renamed_has(list, len, old, olen);
}

enum gw_code
store_rows_by_client(struct store *s, const char *client, uint64_t since_ms,
                     int (*fn)(void *arg, const struct gw_row *row), void *arg)
{
    char list[STORE_RENAMED_MAX * (GW_NAME_MAX + 1)];
    size_t len = 0, i;
    unsigned n = 0;
    MDB_txn *txn;
    int rc = 0;

    if (strlen(client) > GW_NAME_MAX)
        return GW_OK; /* no such client can have rows */
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
        return GW_E_STORE_IO;
    renamed_read(s, txn, client, list, sizeof(list), &len, &n, client);
    /* the names it was renamed from first (their rows are the older ones), then its own */
    for (i = 0; i < len && (rc == 0 || rc == MDB_NOTFOUND); i += strlen(list + i) + 1)
        rc = rows_of_name(s, txn, list + i, since_ms, fn, arg);
    if (rc == 0 || rc == MDB_NOTFOUND)
        rc = rows_of_name(s, txn, client, since_ms, fn, arg);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? GW_OK : GW_E_STORE_IO;
}

enum gw_code
store_rows_since(struct store *s, uint64_t since_ms, int (*fn)(void *arg, const struct gw_row *row),
                 void *arg)
{
    unsigned char start[STORE_ROW_KEY_LEN];
    struct gw_row row;
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    int rc;

    store_row_key(start, since_ms, 0);
    k.mv_size = STORE_ROW_KEY_LEN;
    k.mv_data = start;
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
        return GW_E_STORE_IO;
    if (mdb_cursor_open(txn, s->dbi_rows, &c) != 0) {
        mdb_txn_abort(txn);
        return GW_E_STORE_IO;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (!store_row_decode(v.mv_data, v.mv_size, &row))
            continue;
        if (fn(arg, &row) != 0) {
            rc = MDB_NOTFOUND;
            break;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    return rc == 0 || rc == MDB_NOTFOUND ? GW_OK : GW_E_STORE_IO;
}

void
store_stats_get(struct store *s, struct store_stats *out)
{
    /* Relaxed loads: each counter is exact on its own; together they are not a snapshot. */
    out->rows_committed = atomic_load_explicit(&s->rows_committed, memory_order_relaxed);
    out->rows_dropped = atomic_load_explicit(&s->rows_dropped, memory_order_relaxed);
    out->batches = atomic_load_explicit(&s->batches, memory_order_relaxed);
    out->rows_pruned = atomic_load_explicit(&s->rows_pruned, memory_order_relaxed);
    out->resp_puts = atomic_load_explicit(&s->resp_puts, memory_order_relaxed);
    out->resp_committed = atomic_load_explicit(&s->resp_committed, memory_order_relaxed);
    out->resp_pruned = atomic_load_explicit(&s->resp_pruned, memory_order_relaxed);
    out->resp_dropped = atomic_load_explicit(&s->resp_dropped, memory_order_relaxed);
    /* handled is read first: it never passes queued, so the depth is never negative. */
    uint64_t handled = atomic_load(&s->rows_handled);
    uint64_t queued = atomic_load(&s->rows_queued);

    out->queue_depth = queued > handled ? queued - handled : 0;
    for (unsigned i = 0; i <= STORE_BATCH_BUCKETS; i++)
        out->batch_rows[i] = atomic_load_explicit(&s->batch_rows[i], memory_order_relaxed);
    out->batch_rows_sum = atomic_load_explicit(&s->batch_rows_sum, memory_order_relaxed);
    for (unsigned i = 0; i <= STORE_COMMIT_BUCKETS; i++)
        out->commit_us[i] = atomic_load_explicit(&s->commit_us[i], memory_order_relaxed);
    out->commit_us_sum = atomic_load_explicit(&s->commit_us_sum, memory_order_relaxed);
}
