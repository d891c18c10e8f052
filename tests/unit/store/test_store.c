/* SPDX-License-Identifier: MIT
 * tests/unit/store/test_store.c - the LMDB store: row codec, round trip of a full row,
 * newest-first paging with cursors, reopen and sequences, per-client scans, retention,
 * concurrent submits, queue-full and map-full drops, schema version refusal.
 * Each test works in its own mkdtemp folder under /tmp, removed at the end.
 * See: store/store.c, store/writer.c, store/codec.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "store/store-priv.h"
#include "store/store.h"

static const struct store_cursor t_newest; /* all zero: pages from the newest row */

#define T_DAY_MS ((uint64_t)86400000)
#define T_MAP_MB 64
#define T_THREADS 4
#define T_PER_THREAD 5000

/* ---- fixtures ---- */

struct t_ctx {
    char dir[64];
    char path[96]; /* dir/env: store_open creates it */
    struct store *s;
};

static int
t_rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static int
t_setup(void **state)
{
    struct t_ctx *c = calloc(1, sizeof *c);

    assert_non_null(c);
    strcpy(c->dir, "/tmp/gw-store-test-XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->path, sizeof c->path, "%s/env", c->dir);
    *state = c;
    return 0;
}

static int
t_teardown(void **state)
{
    struct t_ctx *c = *state;

    store_close(c->s);
    nftw(c->dir, t_rm, 8, FTW_DEPTH | FTW_PHYS);
    free(c);
    return 0;
}

static void
t_open(struct t_ctx *c)
{
    char err[256] = "";

    assert_int_equal(store_open(c->path, T_MAP_MB, &c->s, err, sizeof err), GW_OK);
    assert_non_null(c->s);
}

static void
t_reopen(struct t_ctx *c)
{
    store_close(c->s);
    c->s = NULL;
    t_open(c);
}

/* A row with every field set, varied by <i>. */
static struct gw_row *
t_row(unsigned i, uint64_t ts_ms, const char *client)
{
    struct gw_row *r = gw_calloc(1, sizeof *r);

    assert_non_null(r);
    snprintf(r->id, sizeof r->id, "%032x", i);
    r->ts_ms = ts_ms;
    snprintf(r->client, sizeof r->client, "%s", client);
    snprintf(r->model, sizeof r->model, "model-%u", i % 7);
    snprintf(r->upstream, sizeof r->upstream, "up-%u", i % 3);
    r->status = 200;
    r->outcome = GW_OUT_OK;
    r->usage.input_tokens = i;
    r->usage.output_tokens = 2 * (uint64_t)i;
    r->duration_ms = i;
    r->tokens_per_sec = 1.5 * i;
    r->ttfb_ms = -1;
    return r;
}

static void
t_submit(struct store *s, struct gw_row *r)
{
    assert_int_equal(store_row_submit(s, r), GW_OK);
    gw_free(r);
}

/* Commits everything queued: a writer start and stop (stop drains before it returns). */
static void
t_flush(struct store *s)
{
    assert_int_equal(store_writer_start(s, 5, 0), GW_OK);
    store_writer_stop(s);
}

static struct gw_row
t_full_row(void)
{
    struct gw_row r;

    memset(&r, 0, sizeof r);
    strcpy(r.id, "0123456789abcdef0123456789abcdef");
    r.ts_ms = 1764460800123ull;
    strcpy(r.client, "alice");
    memset(r.model, 'm', GW_MODEL_MAX); /* the longest model a row holds */
    strcpy(r.upstream, "openai-eu");
    r.status = 200;
    r.code = GW_E_UPSTREAM_TOO_SLOW;
    r.outcome = GW_OUT_OK;
    r.stream = 1;
    r.usage.input_tokens = 123456789012ull;
    r.usage.output_tokens = 42;
    r.usage.cache_read_tokens = 1u << 20;
    r.usage.cache_write_tokens = 7;
    r.usage.reasoning_tokens = 300;
    r.usage.estimated = true;
    r.cost_micros = -1234567; /* a refund: negative survives */
    r.ttfb_ms = 321;
    r.duration_ms = 98765;
    r.queued_ms = 12;
    r.tokens_per_sec = 87.625;
    r.n_attempts = 3;
    strcpy(r.attempts[0].upstream, "slow-one");
    strcpy(r.attempts[0].model, "gpt-4.1");
    r.attempts[0].outcome = GW_OUT_SLOW_START;
    r.attempts[0].status = 0;
    r.attempts[0].code = GW_E_UPSTREAM_TOO_SLOW;
    r.attempts[0].queued_ms = 3;
    r.attempts[0].ttfb_ms = -1;
    strcpy(r.attempts[1].upstream, "busy-one");
    strcpy(r.attempts[1].model, "gpt-4.1-mini");
    r.attempts[1].outcome = GW_OUT_SKIPPED_BUSY;
    r.attempts[1].status = 503;
    r.attempts[1].code = GW_E_BUSY_ALL;
    r.attempts[1].queued_ms = 4000000000u;
    r.attempts[1].ttfb_ms = INT32_MIN;
    strcpy(r.attempts[2].upstream, "openai-eu");
    strcpy(r.attempts[2].model, "gpt-4.1");
    r.attempts[2].outcome = GW_OUT_OK;
    r.attempts[2].status = 200;
    r.attempts[2].code = GW_OK;
    r.attempts[2].queued_ms = 9;
    r.attempts[2].ttfb_ms = INT32_MAX;
    strcpy(r.attempts[0].cred, "0123456789ab"); /* version 4: the credential's fingerprint */
    strcpy(r.attempts[2].cred, "fedcba987654");
    return r;
}

static void
t_assert_row_equal(const struct gw_row *a, const struct gw_row *b)
{
    assert_string_equal(a->id, b->id);
    assert_int_equal(a->ts_ms, b->ts_ms);
    assert_string_equal(a->client, b->client);
    assert_string_equal(a->model, b->model);
    assert_string_equal(a->upstream, b->upstream);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->code, b->code);
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->stream, b->stream);
    assert_int_equal(a->usage.input_tokens, b->usage.input_tokens);
    assert_int_equal(a->usage.output_tokens, b->usage.output_tokens);
    assert_int_equal(a->usage.cache_read_tokens, b->usage.cache_read_tokens);
    assert_int_equal(a->usage.cache_write_tokens, b->usage.cache_write_tokens);
    assert_int_equal(a->usage.reasoning_tokens, b->usage.reasoning_tokens);
    assert_int_equal(a->usage.estimated, b->usage.estimated);
    assert_true(a->cost_micros == b->cost_micros);
    assert_int_equal(a->ttfb_ms, b->ttfb_ms);
    assert_int_equal(a->duration_ms, b->duration_ms);
    assert_int_equal(a->queued_ms, b->queued_ms);
    assert_true(a->tokens_per_sec == b->tokens_per_sec);
    assert_int_equal(a->n_attempts, b->n_attempts);
    for (unsigned i = 0; i < a->n_attempts; i++) {
        assert_string_equal(a->attempts[i].upstream, b->attempts[i].upstream);
        assert_string_equal(a->attempts[i].cred, b->attempts[i].cred);
        assert_string_equal(a->attempts[i].model, b->attempts[i].model);
        assert_int_equal(a->attempts[i].outcome, b->attempts[i].outcome);
        assert_int_equal(a->attempts[i].status, b->attempts[i].status);
        assert_int_equal(a->attempts[i].code, b->attempts[i].code);
        assert_int_equal(a->attempts[i].queued_ms, b->attempts[i].queued_ms);
        assert_int_equal(a->attempts[i].ttfb_ms, b->attempts[i].ttfb_ms);
    }
}

static uint64_t
t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every row, newest first, through pages of <page>. Returns the count. */
static size_t
t_all_rows(struct store *s, struct gw_row *out, size_t cap, size_t page)
{
    struct store_cursor cursor = {0}, next;
    size_t total = 0, n;

    do {
        assert_true(total + page <= cap);
        assert_int_equal(store_rows_page(s, &cursor, out + total, page, &n, &next), GW_OK);
        total += n;
        cursor = next;
    } while (!store_cursor_is_start(&cursor));
    return total;
}

/* ---- codec ---- */

static void
test_codec_full_row_round_trip(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len;

    (void)state;
    len = store_row_encode(&a, buf, sizeof buf);
    assert_true(len > 0);
    assert_true(store_row_decode(buf, len, &b));
    t_assert_row_equal(&a, &b);
}

static void
test_codec_rejects_every_truncation(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len = store_row_encode(&a, buf, sizeof buf);

    (void)state;
    for (size_t cut = 0; cut < len; cut++)
        assert_false(store_row_decode(buf, cut, &b));
}

static void
test_codec_newer_version_with_appended_field_still_reads(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len = store_row_encode(&a, buf, sizeof buf);

    (void)state;
    buf[0] = STORE_ROW_ENC_VERSION + 1; /* a future writer ... */
    buf[len++] = 0x2a;                  /* ... that appended a field */
    assert_true(store_row_decode(buf, len, &b));
    t_assert_row_equal(&a, &b);
    buf[0] = 0;
    assert_false(store_row_decode(buf, len, &b));
}

static void
test_codec_version_2_row_reads_without_reasoning(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len;

    (void)state;
    a.usage.reasoning_tokens = 0; /* one byte ... */
    for (unsigned i = 0; i < a.n_attempts; i++)
        a.attempts[i].cred[0] = '\0'; /* ... then one byte per attempt (version 4) */
    len = store_row_encode(&a, buf, sizeof buf);
    buf[0] = 2; /* written before reasoning_tokens was appended */
    assert_true(store_row_decode(buf, len - 1 - a.n_attempts, &b));
    t_assert_row_equal(&a, &b);
    assert_int_equal(b.usage.reasoning_tokens, 0);
}

/* A version 3 row (before attempts carried their credential) reads with no credential. */
static void
test_codec_version_3_row_reads_without_creds(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len, tail = 0;

    (void)state;
    len = store_row_encode(&a, buf, sizeof buf);
    for (unsigned i = 0; i < a.n_attempts; i++)
        tail += 1 + strlen(a.attempts[i].cred); /* each a length byte and its bytes */
    buf[0] = 3;
    assert_true(store_row_decode(buf, len - tail, &b));
    for (unsigned i = 0; i < a.n_attempts; i++) {
        assert_string_equal(b.attempts[i].cred, "");
        a.attempts[i].cred[0] = '\0';
    }
    t_assert_row_equal(&a, &b);
}

static void
test_codec_too_many_attempts_is_refused(void **state)
{
    struct gw_row a = t_full_row(), b;
    unsigned char buf[STORE_ROW_ENC_MAX];
    size_t len;

    (void)state;
    /* No attempts, nothing dropped, no reasoning: n_attempts is then the third byte from
     * the end, before dropped's length (0) and reasoning_tokens (0). */
    a.n_attempts = 0;
    a.dropped[0] = '\0';
    a.usage.reasoning_tokens = 0;
    len = store_row_encode(&a, buf, sizeof buf);
    buf[len - 3] = GW_ROW_MAX_ATTEMPTS + 1;
    assert_false(store_row_decode(buf, len, &b));
}

static void
test_codec_small_buffer_returns_zero(void **state)
{
    struct gw_row a = t_full_row();
    unsigned char buf[64];

    (void)state;
    assert_int_equal(store_row_encode(&a, buf, sizeof buf), 0);
}

/* ---- open ---- */

static void
test_store_open_creates_nested_folders(void **state)
{
    struct t_ctx *c = *state;

    snprintf(c->path, sizeof c->path, "%s/a/b/c", c->dir);
    t_open(c);
    assert_int_equal(access(c->path, F_OK), 0);
}

static void
test_store_open_refuses_newer_schema(void **state)
{
    struct t_ctx *c = *state;
    char err[256] = "";

    t_open(c);
    assert_int_equal(store_schema_set(c->s, STORE_SCHEMA_VERSION + 1), GW_OK);
    store_close(c->s);
    c->s = NULL;
    assert_int_equal(store_open(c->path, T_MAP_MB, &c->s, err, sizeof err), GW_E_STORE_IO);
    assert_null(c->s);
    assert_non_null(strstr(err, "newer"));
}

static void
test_store_open_refuses_a_file_as_folder(void **state)
{
    struct t_ctx *c = *state;
    char err[256] = "";
    FILE *f = fopen(c->path, "w");

    assert_non_null(f);
    fclose(f);
    assert_int_equal(store_open(c->path, T_MAP_MB, &c->s, err, sizeof err), GW_E_STORE_IO);
    assert_null(c->s);
    assert_true(err[0] != '\0');
}

/* ---- rows ---- */

static void
test_store_full_row_round_trip(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row want = t_full_row(), got[2];
    struct gw_row *r = gw_malloc(sizeof *r);
    struct store_stats st;
    struct store_cursor next = {1, 1};
    size_t n = 9;

    t_open(c);
    assert_non_null(r);
    *r = want;
    t_submit(c->s, r);
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 2, &n, &next), GW_OK);
    assert_int_equal(n, 1);
    assert_true(store_cursor_is_start(&next));
    t_assert_row_equal(&want, &got[0]);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_committed, 1);
    assert_int_equal(st.batches, 1);
    assert_int_equal(st.rows_dropped, 0);
}

static void
test_store_rows_page_newest_first_across_pages(void **state)
{
    struct t_ctx *c = *state;
    static struct gw_row got[64];
    /* Submit order differs from time order: pages follow ts_ms, not submit order. */
    static const unsigned order[25] = {3, 0,  24, 7,  1,  12, 9,  2,  18, 5,  22, 4, 11,
                                       6, 20, 8,  15, 10, 13, 14, 16, 17, 19, 21, 23};
    struct store_cursor cursor = {0}, next;
    size_t n, total = 0, pages = 0;

    t_open(c);
    for (unsigned i = 0; i < 25; i++)
        t_submit(c->s, t_row(order[i], 1000000 + 1000 * (uint64_t)order[i], "alice"));
    t_flush(c->s);
    do {
        assert_int_equal(store_rows_page(c->s, &cursor, got + total, 10, &n, &next), GW_OK);
        assert_int_equal(n, pages < 2 ? 10 : 5);
        total += n;
        pages++;
        cursor = next;
    } while (!store_cursor_is_start(&cursor));
    assert_int_equal(pages, 3);
    assert_int_equal(total, 25);
    for (unsigned i = 0; i < 25; i++)
        assert_int_equal(got[i].ts_ms, 1000000 + 1000 * (uint64_t)(24 - i));
}

static void
test_store_rows_page_exact_fit_has_no_next(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row got[4];
    struct store_cursor next = {7, 7};
    size_t n;

    t_open(c);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 4, &n, &next), GW_OK);
    assert_int_equal(n, 0);
    assert_true(store_cursor_is_start(&next));
    for (unsigned i = 0; i < 4; i++)
        t_submit(c->s, t_row(i, 5000 + i, "bob"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 4, &n, &next), GW_OK);
    assert_int_equal(n, 4);
    assert_true(store_cursor_is_start(&next));
}

static void
test_store_rows_with_equal_ts_page_without_loss(void **state)
{
    struct t_ctx *c = *state;
    static struct gw_row got[32];
    char seen[20] = {0};

    t_open(c);
    for (unsigned i = 0; i < 20; i++)
        t_submit(c->s, t_row(i, 777, "carol"));
    t_flush(c->s);
    assert_int_equal(t_all_rows(c->s, got, 32, 3), 20);
    for (unsigned i = 0; i < 20; i++) {
        unsigned id = (unsigned)strtoul(got[i].id, NULL, 16);

        assert_true(id < 20);
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
    }
}

static void
test_store_rows_survive_close_and_reopen(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row got[8];
    struct store_cursor next;
    size_t n;

    t_open(c);
    t_submit(c->s, t_row(1, 1000, "alice"));
    t_submit(c->s, t_row(2, 2000, "bob"));
    t_submit(c->s, t_row(3, 3000, "alice"));
    assert_int_equal(store_writer_start(c->s, 5, 0), GW_OK);
    store_writer_stop(c->s);
    t_reopen(c);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 8, &n, &next), GW_OK);
    assert_int_equal(n, 3);
    assert_int_equal(got[0].ts_ms, 3000);
    assert_int_equal(got[2].ts_ms, 1000);
    assert_string_equal(got[1].client, "bob");
}

static void
test_store_close_commits_rows_submitted_while_stopped(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row got[4];
    struct store_cursor next;
    size_t n;

    t_open(c);
    t_submit(c->s, t_row(1, 1000, "alice"));
    t_reopen(c); /* no writer ever ran */
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 4, &n, &next), GW_OK);
    assert_int_equal(n, 1);
}

static void
test_store_sequence_continues_after_reopen(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row got[1];
    struct store_cursor next;
    size_t n;

    t_open(c);
    for (unsigned i = 1; i <= 3; i++)
        t_submit(c->s, t_row(i, 1000 * (uint64_t)i, "alice"));
    t_flush(c->s);
    /* With one row per page, <next> is the key of the row returned. */
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(next.seq, 3);
    t_reopen(c);
    t_submit(c->s, t_row(4, 4000, "alice"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(got[0].ts_ms, 4000);
    assert_int_equal(next.seq, 4);
    /* Even with every row pruned, sequences are not reused. */
    assert_int_equal(store_prune(c->s, 10 * T_DAY_MS, 1, NULL), GW_OK);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(n, 0);
    t_reopen(c);
    t_submit(c->s, t_row(5, 5000, "alice"));
    t_submit(c->s, t_row(6, 6000, "alice"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(next.seq, 6);
}

/* A store from a gw that kept the by_seq database (be64 seq -> be64 ts): it is deleted
 * on open, and a sequence it held above meta "seq" is never used again. */
static void
test_store_retires_an_older_by_seq_and_keeps_its_sequence(void **state)
{
    struct t_ctx *c = *state;
    struct store_cursor next;
    struct gw_row got[1];
    unsigned char kb[8], vb[8];
    MDB_val k = {.mv_size = 8, .mv_data = kb}, v = {.mv_size = 8, .mv_data = vb};
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    size_t n;

    t_open(c);
    t_submit(c->s, t_row(1, 1000, "alice"));
    t_flush(c->s);
    store_close(c->s);
    c->s = NULL;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_set_mapsize(env, (size_t)T_MAP_MB << 20), 0);
    assert_int_equal(mdb_env_open(env, c->path, MDB_NOTLS, 0640), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "by_seq", MDB_CREATE, &dbi), 0);
    store_be64_put(kb, 1000);
    store_be64_put(vb, 1000);
    assert_int_equal(mdb_put(txn, dbi, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    t_open(c);
    assert_int_equal(mdb_txn_begin(c->s->env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "by_seq", 0, &dbi), MDB_NOTFOUND);
    mdb_txn_abort(txn);
    t_submit(c->s, t_row(2, 2000, "alice"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(next.ts_ms, 2000);
    assert_int_equal(next.seq, 1001);
    t_reopen(c); /* the raised sequence was kept in meta "seq" */
    t_submit(c->s, t_row(3, 3000, "alice"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 1, &n, &next), GW_OK);
    assert_int_equal(next.seq, 1002);
}

struct t_scan {
    uint64_t ts[64];
    char client[64][GW_NAME_MAX + 1];
    size_t n;
    size_t stop_at; /* non-zero: return 1 once n reaches it */
};

static int
t_on_row(void *arg, const struct gw_row *row)
{
    struct t_scan *sc = arg;

    assert_true(sc->n < 64);
    sc->ts[sc->n] = row->ts_ms;
    strcpy(sc->client[sc->n], row->client);
    sc->n++;
    return sc->stop_at && sc->n >= sc->stop_at;
}

/* A sync wakes a writer that would otherwise sleep a minute, and returns once the rows
 * queued before it can be read. */
static void
test_store_sync_returns_once_the_rows_queued_before_it_are_readable(void **state)
{
    struct t_ctx *c = *state;
    struct t_scan sc;

    t_open(c);
    assert_int_equal(store_writer_start(c->s, 60000, 0), GW_OK);
    assert_true(store_sync(c->s, 1000)); /* nothing queued: at once */
    for (unsigned i = 1; i <= 3; i++)
        t_submit(c->s, t_row(i, 1000 * i, "alice"));
    assert_true(store_sync(c->s, 30000));
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 3);
    store_writer_stop(c->s);
}

/* Without a writer nothing is handled: the sync gives up at its timeout. */
static void
test_store_sync_without_a_writer_times_out(void **state)
{
    struct t_ctx *c = *state;

    t_open(c);
    t_submit(c->s, t_row(1, 1000, "alice"));
    assert_false(store_sync(c->s, 20));
}

/* A renamed client's rows are read under its new name, older names first, across a
 * chain of renames and after the store is reopened; a rename back to an old name does
 * not count that name twice; the rename's arguments are checked. */
static void
test_store_client_renamed_rows_follow_the_new_name(void **state)
{
    struct t_ctx *c = *state;
    struct t_scan sc;

    t_open(c);
    t_submit(c->s, t_row(1, 1000, "alice"));
    t_submit(c->s, t_row(2, 2000, "alice"));
    t_submit(c->s, t_row(3, 3000, "ally"));
    t_submit(c->s, t_row(4, 4000, "al3"));
    t_submit(c->s, t_row(5, 5000, "bob"));
    t_flush(c->s);

    assert_int_equal(store_client_renamed(c->s, "alice", "ally"), GW_OK);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "ally", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 3);
    assert_string_equal(sc.client[0], "alice");
    assert_string_equal(sc.client[1], "alice");
    assert_string_equal(sc.client[2], "ally");
    /* the old name still reads its own rows only */
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 2);

    /* a chain: al3 gets ally's rows and alice's */
    assert_int_equal(store_client_renamed(c->s, "ally", "al3"), GW_OK);
    t_reopen(c);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "al3", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 4);

    /* back to an old name: alice reads al3, ally and her own rows once each */
    assert_int_equal(store_client_renamed(c->s, "al3", "alice"), GW_OK);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 4);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "bob", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);

    assert_int_equal(store_client_renamed(c->s, "bob", "bob"), GW_E_BAD_REQUEST);
}

static void
test_store_rows_by_client_since_oldest_first(void **state)
{
    struct t_ctx *c = *state;
    struct t_scan sc;

    t_open(c);
    /* Neighbours in key order: "al" sorts before "alice", "alice2" after. */
    t_submit(c->s, t_row(1, 5000, "alice"));
    t_submit(c->s, t_row(2, 1000, "alice"));
    t_submit(c->s, t_row(3, 3000, "alice"));
    t_submit(c->s, t_row(4, 3000, "alice2"));
    t_submit(c->s, t_row(5, 4000, "al"));
    t_submit(c->s, t_row(6, 2000, "bob"));
    t_submit(c->s, t_row(7, 3000, "alice"));
    t_submit(c->s, t_row(8, 9000, ""));
    t_flush(c->s);

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 3000, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 3);
    assert_int_equal(sc.ts[0], 3000);
    assert_int_equal(sc.ts[1], 3000);
    assert_int_equal(sc.ts[2], 5000);
    for (size_t i = 0; i < sc.n; i++)
        assert_string_equal(sc.client[i], "alice");

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 4);
    assert_int_equal(sc.ts[0], 1000);

    memset(&sc, 0, sizeof sc);
    sc.stop_at = 2;
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 2);

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "al", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);
    assert_int_equal(sc.ts[0], 4000);

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);
    assert_int_equal(sc.ts[0], 9000);

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "nobody", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 0);
}

static void
test_store_rows_since_scans_every_client_oldest_first(void **state)
{
    struct t_ctx *c = *state;
    struct t_scan sc;

    t_open(c);
    t_submit(c->s, t_row(1, 5000, "alice"));
    t_submit(c->s, t_row(2, 1000, "bob"));
    t_submit(c->s, t_row(3, 3000, ""));
    t_submit(c->s, t_row(4, 3000, "alice"));
    t_flush(c->s);

    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_since(c->s, 3000, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 3);
    assert_int_equal(sc.ts[0], 3000);
    assert_int_equal(sc.ts[1], 3000);
    assert_int_equal(sc.ts[2], 5000);
    memset(&sc, 0, sizeof sc);
    sc.stop_at = 1;
    assert_int_equal(store_rows_since(c->s, 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);
    assert_string_equal(sc.client[0], "bob");
}

/* ---- learned quota limits ---- */

struct t_learned {
    struct store_learned got[8];
    size_t n;
};

static int
t_on_learned(void *arg, const struct store_learned *l)
{
    struct t_learned *t = arg;

    assert_true(t->n < 8);
    t->got[t->n++] = *l;
    return 0;
}

static struct store_learned
t_learned(const char *provider, const char *model, const char *fp, unsigned win, uint64_t limit)
{
    struct store_learned l;

    memset(&l, 0, sizeof l);
    strcpy(l.provider, provider);
    strcpy(l.model, model);
    strcpy(l.fp, fp);
    l.win = win;
    l.limit = limit;
    l.at_ms = 1764460800123ull;
    strcpy(l.origin, "x-ratelimit-limit-tokens");
    return l;
}

/* Puts are kept across close and reopen; a later put of the same key replaces the first. */
static void
test_store_learned_limits_survive_reopen_and_replace(void **state)
{
    struct t_ctx *c = *state;
    struct store_learned a = t_learned("groq", "llama", "0123456789ab", 1, 30000);
    struct store_learned b = t_learned("groq", "", "0123456789ab", 1, 6000);
    struct t_learned t;

    t_open(c);
    assert_int_equal(store_learned_put(c->s, &a), GW_OK);
    assert_int_equal(store_learned_put(c->s, &b), GW_OK);
    a.limit = 20000; /* replaces the pending one */
    assert_int_equal(store_learned_put(c->s, &a), GW_OK);
    t_reopen(c); /* close commits what is pending */
    memset(&t, 0, sizeof t);
    assert_int_equal(store_learned_each(c->s, t_on_learned, &t), GW_OK);
    assert_int_equal(t.n, 2);
    /* key order: model "" before "llama" */
    assert_string_equal(t.got[0].model, "");
    assert_int_equal(t.got[0].limit, 6000);
    assert_string_equal(t.got[1].provider, "groq");
    assert_string_equal(t.got[1].model, "llama");
    assert_string_equal(t.got[1].fp, "0123456789ab");
    assert_int_equal(t.got[1].win, 1);
    assert_int_equal(t.got[1].limit, 20000);
    assert_int_equal(t.got[1].at_ms, 1764460800123ull);
    assert_string_equal(t.got[1].origin, "x-ratelimit-limit-tokens");
}

/* ---- retention ---- */

static void
test_store_retention_deletes_old_rows_only(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = 400 * T_DAY_MS, pruned = 0;
    struct gw_row got[8];
    struct store_stats st;
    struct t_scan sc;

    t_open(c);
    t_submit(c->s, t_row(1, now - 40 * T_DAY_MS, "alice"));
    t_submit(c->s, t_row(2, now - 31 * T_DAY_MS - 1, "bob"));
    t_submit(c->s, t_row(3, now - 31 * T_DAY_MS, "alice"));
    t_submit(c->s, t_row(4, now - 1, "bob"));
    t_flush(c->s);
    assert_int_equal(store_prune(c->s, now, 31, &pruned), GW_OK);
    assert_int_equal(pruned, 2);
    assert_int_equal(t_all_rows(c->s, got, 8, 8), 2);
    assert_int_equal(got[0].ts_ms, now - 1);
    assert_int_equal(got[1].ts_ms, now - 31 * T_DAY_MS);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "alice", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);
    memset(&sc, 0, sizeof sc);
    assert_int_equal(store_rows_by_client(c->s, "bob", 0, t_on_row, &sc), GW_OK);
    assert_int_equal(sc.n, 1);
    assert_int_equal(sc.ts[0], now - 1);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_pruned, 2);
    /* row_days 0 keeps everything */
    pruned = 0;
    assert_int_equal(store_prune(c->s, now * 10, 0, &pruned), GW_OK);
    assert_int_equal(pruned, 0);
}

static void
test_store_retention_runs_in_bounded_chunks(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = 400 * T_DAY_MS, pruned = 0;
    unsigned total = STORE_PRUNE_CHUNK * 2 + 17;
    struct gw_row got[2];
    bool more = false;
    struct store_cursor next;
    size_t n;

    t_open(c);
    for (unsigned i = 0; i < total; i++)
        t_submit(c->s, t_row(i, 1000 + i, i % 2 ? "alice" : "bob"));
    t_submit(c->s, t_row(9999, now, "alice"));
    t_flush(c->s);
    assert_int_equal(store_prune_chunk(c->s, now - T_DAY_MS, 10, &more, &pruned), GW_OK);
    assert_true(more);
    assert_int_equal(pruned, 10);
    assert_int_equal(store_prune(c->s, now, 1, &pruned), GW_OK);
    assert_int_equal(pruned, total);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 2, &n, &next), GW_OK);
    assert_int_equal(n, 1);
    assert_int_equal(got[0].ts_ms, now);
}

static void
test_store_cursor_of_pruned_row_ends_listing(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = 400 * T_DAY_MS;
    struct store_cursor cursor;
    struct gw_row got[2];
    size_t n;

    t_open(c);
    for (unsigned i = 0; i < 4; i++)
        t_submit(c->s, t_row(i, 1000 + i, "alice"));
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 2, &n, &cursor), GW_OK);
    assert_false(store_cursor_is_start(&cursor));
    assert_int_equal(store_prune(c->s, now, 1, NULL), GW_OK);
    assert_int_equal(store_rows_page(c->s, &cursor, got, 2, &n, &cursor), GW_OK);
    assert_int_equal(n, 0);
    assert_true(store_cursor_is_start(&cursor));
}

static void
test_store_writer_start_prunes_old_rows(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = t_now_ms();
    struct store_stats st;
    struct gw_row got[4];

    t_open(c);
    t_submit(c->s, t_row(1, now - 90 * T_DAY_MS, "alice"));
    t_submit(c->s, t_row(2, now - 60 * T_DAY_MS, "alice"));
    t_submit(c->s, t_row(3, now, "alice"));
    t_flush(c->s); /* row_days 0: nothing pruned */
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_pruned, 0);
    assert_int_equal(store_writer_start(c->s, 5, 31), GW_OK);
    /* Wait for the counter (bounded, about 10 s), not for a fixed time. */
    for (unsigned i = 0; i < 10000; i++) {
        store_stats_get(c->s, &st);
        if (st.rows_pruned == 2)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    store_writer_stop(c->s);
    assert_int_equal(st.rows_pruned, 2);
    assert_int_equal(t_all_rows(c->s, got, 4, 4), 1);
    assert_int_equal(got[0].ts_ms, now);
}

/* ---- concurrency and drops ---- */

struct t_producer {
    struct store *s;
    unsigned t;
    unsigned failed;
    uint64_t now;
};

static void *
t_produce(void *arg)
{
    struct t_producer *p = arg;
    char client[16];

    snprintf(client, sizeof client, "c%u", p->t);
    for (unsigned i = 0; i < T_PER_THREAD; i++) {
        /* one row filled again and again; its records, given back by the writer, taken
         * by four threads at once */
        struct gw_row r;

        memset(&r, 0, sizeof r);
        snprintf(r.id, sizeof r.id, "%u", i);
        r.ts_ms = p->now + i; /* recent: the writer's retention keeps them */
        snprintf(r.client, sizeof r.client, "%s", client);
        if (store_row_submit(p->s, &r) != GW_OK)
            p->failed++;
    }
    return NULL;
}

struct t_count {
    unsigned char seen[T_PER_THREAD];
    unsigned n, dup;
};

static int
t_on_count(void *arg, const struct gw_row *row)
{
    struct t_count *tc = arg;
    unsigned long i = strtoul(row->id, NULL, 10);

    if (i >= T_PER_THREAD || tc->seen[i])
        tc->dup++;
    else
        tc->seen[i] = 1;
    tc->n++;
    return 0;
}

static void
test_store_submit_from_four_threads_keeps_every_row_once(void **state)
{
    struct t_ctx *c = *state;
    struct t_producer prod[T_THREADS];
    pthread_t th[T_THREADS];
    struct store_stats st;
    static struct t_count tc[T_THREADS];

    t_open(c);
    assert_int_equal(store_writer_start(c->s, 2, 31), GW_OK);
    for (unsigned t = 0; t < T_THREADS; t++) {
        prod[t] = (struct t_producer){.s = c->s, .t = t, .now = t_now_ms()};
        assert_int_equal(pthread_create(&th[t], NULL, t_produce, &prod[t]), 0);
    }
    /* every producer joined before an assertion can leave the test (prod[] with it) */
    for (unsigned t = 0; t < T_THREADS; t++)
        pthread_join(th[t], NULL);
    for (unsigned t = 0; t < T_THREADS; t++)
        assert_int_equal(prod[t].failed, 0);
    store_writer_stop(c->s);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_committed, T_THREADS * T_PER_THREAD);
    assert_int_equal(st.rows_dropped, 0);
    assert_true(st.batches >= 1);
    for (unsigned t = 0; t < T_THREADS; t++) {
        char client[16];

        snprintf(client, sizeof client, "c%u", t);
        memset(&tc[t], 0, sizeof tc[t]);
        assert_int_equal(store_rows_by_client(c->s, client, 0, t_on_count, &tc[t]), GW_OK);
        assert_int_equal(tc[t].n, T_PER_THREAD);
        assert_int_equal(tc[t].dup, 0);
    }
}

/* A row crosses to the writer as its encoding (store_row_submit, the caller keeps the
 * row): a short row in a record of STORE_REC_CAP bytes, which the writer gives back for
 * the next submit to fill without an allocation; a longer one (sixteen attempts, the
 * longest names) in a record of its own size. Both read back as they were. */
static void
test_store_rows_cross_as_records_and_short_ones_come_back(void **state)
{
    struct t_ctx *c = *state;
    static unsigned char enc[STORE_ROW_ENC_MAX];
    struct gw_row small = t_full_row(), large = t_full_row(), got[3];
    struct store_cursor next;
    struct store_stats st;
    size_t n;

    small.n_attempts = 1;
    strcpy(small.model, "gpt-4.1");
    large.ts_ms = small.ts_ms + 1;
    large.n_attempts = GW_ROW_MAX_ATTEMPTS;
    for (unsigned i = 0; i < GW_ROW_MAX_ATTEMPTS; i++) {
        large.attempts[i] = small.attempts[0];
        memset(large.attempts[i].upstream, 'u', GW_NAME_MAX);
        memset(large.attempts[i].model, 'm', GW_MODEL_MAX);
    }
    memset(large.dropped, 'd', GW_ROW_DROPPED_LEN);
    assert_in_range(store_row_encode(&small, enc, sizeof enc), 1, STORE_REC_CAP);
    assert_true(store_row_encode(&large, enc, sizeof enc) > STORE_REC_CAP);

    t_open(c);
    assert_int_equal(store_row_submit(c->s, &small), GW_OK);
    assert_int_equal(store_row_submit(c->s, &large), GW_OK);
    t_flush(c->s);
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 3, &n, &next), GW_OK);
    assert_int_equal(n, 2);
    t_assert_row_equal(&large, &got[0]);
    t_assert_row_equal(&small, &got[1]);

    /* the short row's record came back: the next submit allocates nothing; the one after
     * finds none waiting, and without memory the row is dropped and counted */
    gw_alloc_fail_at(1);
    small.ts_ms += 10;
    assert_int_equal(store_row_submit(c->s, &small), GW_OK);
    assert_int_equal(store_row_submit(c->s, &small), GW_E_NOMEM);
    gw_alloc_fail_at(0);
    t_flush(c->s);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_committed, 3);
    assert_int_equal(st.rows_dropped, 1);
}

static void
test_store_queue_full_drops_and_counts(void **state)
{
    struct t_ctx *c = *state;
    struct gw_row *r;
    struct store_stats st;
    char err[256];

    assert_int_equal(store_open_ring(c->path, T_MAP_MB, 4, &c->s, err, sizeof err), GW_OK);
    for (unsigned i = 0; i < 3; i++)
        t_submit(c->s, t_row(i, 1000 + i, "alice"));
    for (unsigned i = 0; i < 2; i++) {
        r = t_row(10 + i, 2000, "alice");
        assert_int_equal(store_row_submit(c->s, r), GW_E_STORE_QUEUE_FULL);
        gw_free(r);
    }
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_dropped, 2);
    t_flush(c->s);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_committed, 3);
    assert_int_equal(st.rows_dropped, 2);
}

static void
test_store_open_ring_refuses_non_power_of_two(void **state)
{
    struct t_ctx *c = *state;
    char err[256];

    assert_int_equal(store_open_ring(c->path, T_MAP_MB, 6, &c->s, err, sizeof err), GW_E_STORE_IO);
    assert_null(c->s);
}

static void
test_store_map_full_drops_batch_without_crash(void **state)
{
    struct t_ctx *c = *state;
    struct store_stats st;
    struct gw_row got[2];
    unsigned total = 20000;
    struct store_cursor next;
    size_t n;
    char err[256];

    assert_int_equal(store_open(c->path, 1, &c->s, err, sizeof err), GW_OK);
    for (unsigned i = 0; i < total; i++)
        t_submit(c->s, t_row(i, 1000 + i, "alice"));
    /* 20000 rows cannot fit in 1 MiB: each batch that hits the end of the map is
     * dropped whole, the writer goes on with the next one. */
    t_flush(c->s);
    store_stats_get(c->s, &st);
    assert_true(st.rows_dropped > 0);
    assert_int_equal(st.rows_dropped + st.rows_committed, total);
    /* Nothing is left queued, and what was committed reads back. */
    assert_int_equal(store_rows_page(c->s, &t_newest, got, 2, &n, &next), GW_OK);
    assert_int_equal(n, st.rows_committed > 0 ? (st.rows_committed > 1 ? 2 : 1) : 0);
}

#define T_TEST(f) cmocka_unit_test_setup_teardown(f, t_setup, t_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_full_row_round_trip),
        cmocka_unit_test(test_codec_rejects_every_truncation),
        cmocka_unit_test(test_codec_newer_version_with_appended_field_still_reads),
        cmocka_unit_test(test_codec_version_2_row_reads_without_reasoning),
        cmocka_unit_test(test_codec_version_3_row_reads_without_creds),
        cmocka_unit_test(test_codec_too_many_attempts_is_refused),
        cmocka_unit_test(test_codec_small_buffer_returns_zero),
        T_TEST(test_store_open_creates_nested_folders),
        T_TEST(test_store_open_refuses_newer_schema),
        T_TEST(test_store_open_refuses_a_file_as_folder),
        T_TEST(test_store_full_row_round_trip),
        T_TEST(test_store_rows_page_newest_first_across_pages),
        T_TEST(test_store_rows_page_exact_fit_has_no_next),
        T_TEST(test_store_retires_an_older_by_seq_and_keeps_its_sequence),
        T_TEST(test_store_rows_with_equal_ts_page_without_loss),
        T_TEST(test_store_rows_survive_close_and_reopen),
        T_TEST(test_store_close_commits_rows_submitted_while_stopped),
        T_TEST(test_store_sequence_continues_after_reopen),
        T_TEST(test_store_rows_by_client_since_oldest_first),
        T_TEST(test_store_client_renamed_rows_follow_the_new_name),
        T_TEST(test_store_rows_since_scans_every_client_oldest_first),
        T_TEST(test_store_learned_limits_survive_reopen_and_replace),
        T_TEST(test_store_sync_returns_once_the_rows_queued_before_it_are_readable),
        T_TEST(test_store_sync_without_a_writer_times_out),
        T_TEST(test_store_retention_deletes_old_rows_only),
        T_TEST(test_store_retention_runs_in_bounded_chunks),
        T_TEST(test_store_cursor_of_pruned_row_ends_listing),
        T_TEST(test_store_writer_start_prunes_old_rows),
        T_TEST(test_store_submit_from_four_threads_keeps_every_row_once),
        T_TEST(test_store_rows_cross_as_records_and_short_ones_come_back),
        T_TEST(test_store_queue_full_drops_and_counts),
        T_TEST(test_store_open_ring_refuses_non_power_of_two),
        T_TEST(test_store_map_full_drops_batch_without_crash),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
