/* SPDX-License-Identifier: MIT
 * tests/unit/store/test_resp.c - the Responses conversations of the store: the value
 * head codec (version 1 without an owner); put then get before the batch commits
 * (from memory), after the commit, after close and reopen; not found; multi-MB
 * items; the id, name and shape limits; a later put replacing an earlier one; a
 * response read back only by the client that made it (or that client under a later
 * name); retention by ts (synchronous and by the writer); the bound on bytes waiting
 * for a commit; a map too small for a response dropping it but not the rows of its
 * batch; store_sync; gets from several threads while the writer commits (run under
 * TSan too).
 * Each test works in its own mkdtemp folder under /tmp, removed at the end.
 * See: store/resp.c, store/writer.c, store/codec.c
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
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "store/store-priv.h"
#include "store/store.h"

#define T_DAY_MS ((uint64_t)86400000)
#define T_MAP_MB 64
#define T_SHAPE 3        /* any small integer: the store keeps what the caller gives */
#define T_CLIENT "alice" /* the gateway key whose request made a response */

/* ---- fixtures ---- */

struct t_ctx {
    char dir[64];
    char path[96]; /* dir/env: store_open creates it */
    struct store *s;
    struct gw_buf items;
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
    strcpy(c->dir, "/tmp/gw-resp-test-XXXXXX");
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
    gw_buf_fini(&c->items);
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

/* Commits everything queued: a writer start and stop (stop drains before it returns). */
static void
t_flush(struct store *s)
{
    assert_int_equal(store_writer_start(s, 5, 0), GW_OK);
    store_writer_stop(s);
}

static uint64_t
t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
t_put(struct store *s, const char *id, uint64_t ts_ms, const char *items)
{
    assert_int_equal(
        store_resp_put(s, id, T_CLIENT, "openai-eu", T_SHAPE, ts_ms, items, strlen(items)), GW_OK);
}

/* Gets <id> and checks it holds the <n> bytes at <items>, from provider openai-eu and
 * shape T_SHAPE. */
static void
t_get_is_n(struct t_ctx *c, const char *id, const char *items, size_t n)
{
    char provider[GW_NAME_MAX + 1];
    int shape = -1;

    assert_int_equal(store_resp_get(c->s, id, T_CLIENT, provider, &shape, &c->items), GW_OK);
    assert_string_equal(provider, "openai-eu");
    assert_int_equal(shape, T_SHAPE);
    assert_int_equal(c->items.len, n);
    assert_memory_equal(c->items.data, items, n);
}

static void
t_get_is(struct t_ctx *c, const char *id, const char *items)
{
    t_get_is_n(c, id, items, strlen(items));
}

static enum gw_code
t_get(struct t_ctx *c, const char *id)
{
    char provider[GW_NAME_MAX + 1];
    int shape;

    return store_resp_get(c->s, id, T_CLIENT, provider, &shape, &c->items);
}

/* Whether LMDB itself holds <id> (a committed write), read past the pending table. */
static bool
t_committed(struct store *s, const char *id)
{
    MDB_txn *txn;
    MDB_val k = {.mv_size = strlen(id), .mv_data = (void *)(uintptr_t)id}, v;
    int rc;

    assert_int_equal(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn), 0);
    rc = mdb_get(txn, s->dbi_resp, &k, &v);
    mdb_txn_abort(txn);
    assert_true(rc == 0 || rc == MDB_NOTFOUND);
    return rc == 0;
}

/* <n> bytes of JSON-ish text that differ with <seed> everywhere. */
static char *
t_big_items(size_t n, unsigned seed)
{
    char *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (char)('a' + (x >> 24) % 26);
    }
    p[0] = '[';
    p[n - 1] = ']';
    return p;
}

/* ---- codec ---- */

static void
test_resp_head_round_trip_and_truncation(void **state)
{
    unsigned char buf[STORE_RESP_HEAD_MAX + 4];
    char name[GW_NAME_MAX + 1], cname[GW_NAME_MAX + 1];
    char provider[GW_NAME_MAX + 1], client[GW_NAME_MAX + 1];
    uint64_t ts;
    unsigned flags;
    size_t len, off;
    int shape;

    (void)state;
    memset(name, 'p', GW_NAME_MAX);
    name[GW_NAME_MAX] = '\0';
    memset(cname, 'c', GW_NAME_MAX);
    cname[GW_NAME_MAX] = '\0';
    len = store_resp_head_encode(buf, 1764460800123ull, name, GW_NAME_MAX, cname, GW_NAME_MAX, 255,
                                 0);
    assert_int_equal(len, STORE_RESP_HEAD_MAX);
    memcpy(buf + len, "[]", 2);
    assert_true(store_resp_head_decode(buf, len + 2, &ts, provider, client, &shape, &flags, &off));
    assert_int_equal(ts, 1764460800123ull);
    assert_string_equal(provider, name);
    assert_string_equal(client, cname);
    assert_int_equal(shape, 255);
    assert_int_equal(flags, 0);
    assert_int_equal(off, len);
    /* every cut inside the head is refused */
    for (size_t cut = 0; cut < len; cut++)
        assert_false(store_resp_head_decode(buf, cut, &ts, provider, client, &shape, &flags, &off));
    /* a name longer than any provider's, or a head shorter than its name: not ours */
    buf[12] = GW_NAME_MAX + 1;
    assert_false(store_resp_head_decode(buf, len + 2, NULL, NULL, NULL, NULL, NULL, NULL));
    buf[12] = GW_NAME_MAX;
    buf[1] = (unsigned char)(len - 1);
    assert_false(store_resp_head_decode(buf, len + 2, NULL, NULL, NULL, NULL, NULL, NULL));
    /* nor a client's name longer than any client's */
    buf[1] = (unsigned char)len;
    buf[STORE_RESP_HEAD_FIXED + GW_NAME_MAX] = GW_NAME_MAX + 1;
    assert_false(store_resp_head_decode(buf, len + 2, NULL, NULL, NULL, NULL, NULL, NULL));
}

/* A version 1 head (before responses had an owner) still reads, with no client. */
static void
test_resp_head_of_version_1_reads_with_no_client(void **state)
{
    unsigned char buf[64];
    char provider[GW_NAME_MAX + 1], client[GW_NAME_MAX + 1] = "x";
    size_t off;
    int shape;

    (void)state;
    /* version 1, head 15, shape 4, flags 0, ts 9, provider "up", then the items */
    memcpy(buf, "\x01\x0f\x04\x00\0\0\0\0\0\0\0\x09\x02up[1]", 18);
    assert_true(store_resp_head_decode(buf, 18, NULL, provider, client, &shape, NULL, &off));
    assert_string_equal(provider, "up");
    assert_string_equal(client, "");
    assert_int_equal(shape, 4);
    assert_int_equal(off, 15);
}

/* A later version that appends a head field (and raises the head length) still reads:
 * the items start where the head length says. */
static void
test_resp_head_with_appended_field_still_reads(void **state)
{
    unsigned char buf[64];
    char provider[GW_NAME_MAX + 1], client[GW_NAME_MAX + 1];
    size_t len, off;
    int shape;

    (void)state;
    len = store_resp_head_encode(buf, 7, "up", 2, "cl", 2, 1, 0);
    buf[0] = STORE_RESP_ENC_VERSION + 1;
    buf[1] = (unsigned char)(len + 3);
    memcpy(buf + len, "xyz[1]", 6);
    assert_true(store_resp_head_decode(buf, len + 6, NULL, provider, client, &shape, NULL, &off));
    assert_string_equal(provider, "up");
    assert_string_equal(client, "cl");
    assert_int_equal(off, len + 3);
    assert_memory_equal(buf + off, "[1]", 3);
}

/* ---- put and get ---- */

static void
test_resp_get_sees_a_put_before_its_batch_commits(void **state)
{
    struct t_ctx *c = *state;
    struct store_stats st;

    t_open(c);
    t_put(c->s, "resp_1", t_now_ms(), "[{\"type\":\"message\"}]");
    /* no writer has run: the put is only in memory */
    assert_false(t_committed(c->s, "resp_1"));
    t_get_is(c, "resp_1", "[{\"type\":\"message\"}]");
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_puts, 1);
    assert_int_equal(st.resp_committed, 0);
    t_flush(c->s);
    assert_true(t_committed(c->s, "resp_1"));
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_committed, 1);
    assert_int_equal(st.resp_dropped, 0);
    /* the table let go of it: what get reads now comes from LMDB */
    assert_int_equal(c->s->resp_pending_bytes, 0);
    for (unsigned b = 0; b < STORE_RESP_BUCKETS; b++)
        assert_null(c->s->resp_tab[b]);
    t_get_is(c, "resp_1", "[{\"type\":\"message\"}]");
}

static enum gw_code
t_get_as(struct t_ctx *c, const char *id, const char *client)
{
    char provider[GW_NAME_MAX + 1];
    int shape;

    return store_resp_get(c->s, id, client, provider, &shape, &c->items);
}

/* A response is read back only by the client whose request made it: another client's
 * get finds nothing (nothing copied), before its batch commits and after. */
static void
test_resp_get_is_for_the_client_that_made_it_only(void **state)
{
    struct t_ctx *c = *state;

    t_open(c);
    t_put(c->s, "resp_a", t_now_ms(), "[\"alice's\"]");
    assert_int_equal(t_get_as(c, "resp_a", "bob"), GW_E_NOT_FOUND);
    assert_int_equal(c->items.len, 0);
    assert_int_equal(t_get_as(c, "resp_a", "alic"), GW_E_NOT_FOUND); /* a prefix is not it */
    t_get_is(c, "resp_a", "[\"alice's\"]");
    t_flush(c->s);
    assert_true(t_committed(c->s, "resp_a"));
    assert_int_equal(t_get_as(c, "resp_a", "bob"), GW_E_NOT_FOUND);
    assert_int_equal(c->items.len, 0);
    assert_int_equal(t_get_as(c, "resp_a", "alicea"), GW_E_NOT_FOUND);
    t_get_is(c, "resp_a", "[\"alice's\"]");
}

/* A client renamed (store_client_renamed) still reads what it made under its old name;
 * nobody else does. */
static void
test_resp_get_follows_the_client_s_renames(void **state)
{
    struct t_ctx *c = *state;

    t_open(c);
    t_put(c->s, "resp_mem", t_now_ms(), "[1]"); /* stays pending */
    assert_int_equal(store_client_renamed(c->s, T_CLIENT, "alicia"), GW_OK);
    assert_int_equal(t_get_as(c, "resp_mem", "alicia"), GW_OK);
    assert_memory_equal(c->items.data, "[1]", 3);
    t_flush(c->s);
    assert_int_equal(store_client_renamed(c->s, "alicia", "ally"), GW_OK);
    assert_int_equal(t_get_as(c, "resp_mem", "ally"), GW_OK); /* committed, two renames on */
    assert_memory_equal(c->items.data, "[1]", 3);
    assert_int_equal(t_get_as(c, "resp_mem", "bob"), GW_E_NOT_FOUND);
}

/* A value kept before responses had an owner (a version 1 head) is nobody's. */
static void
test_resp_version_1_value_is_found_for_no_client(void **state)
{
    struct t_ctx *c = *state;
    static char id[] = "resp_1", val[] = "\x01\x0f\x04\x00\0\0\0\0\0\0\0\x09\x02up[1]";
    MDB_val k = {.mv_size = 6, .mv_data = id}, v = {.mv_size = 18, .mv_data = val};
    MDB_txn *txn;

    t_open(c);
    assert_int_equal(mdb_txn_begin(c->s->env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_put(txn, c->s->dbi_resp, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    assert_true(t_committed(c->s, "resp_1"));
    assert_int_equal(t_get_as(c, "resp_1", T_CLIENT), GW_E_NOT_FOUND);
    assert_int_equal(t_get_as(c, "resp_1", "bob"), GW_E_NOT_FOUND);
}

static void
test_resp_survives_close_and_reopen(void **state)
{
    struct t_ctx *c = *state;

    t_open(c);
    t_put(c->s, "resp_a", t_now_ms(), "[1]");
    t_flush(c->s);
    t_put(c->s, "resp_b", t_now_ms(), "[2]"); /* queued, no writer: close commits it */
    t_reopen(c);
    t_get_is(c, "resp_a", "[1]");
    t_get_is(c, "resp_b", "[2]");
}

static void
test_resp_unknown_and_impossible_ids_are_not_found(void **state)
{
    struct t_ctx *c = *state;
    char longid[STORE_RESP_ID_MAX + 2];
    char provider[GW_NAME_MAX + 1];
    int shape;

    t_open(c);
    t_put(c->s, "resp_x", t_now_ms(), "[]");
    assert_int_equal(t_get(c, "resp_y"), GW_E_NOT_FOUND);
    assert_int_equal(c->items.len, 0);
    t_flush(c->s);
    assert_int_equal(t_get(c, "resp_y"), GW_E_NOT_FOUND);
    assert_int_equal(t_get(c, "resp_"), GW_E_NOT_FOUND); /* a prefix is not a match */
    assert_int_equal(t_get(c, ""), GW_E_NOT_FOUND);
    memset(longid, 'r', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    assert_int_equal(t_get(c, longid), GW_E_NOT_FOUND);
    /* an error leaves the outputs empty, even after a hit filled them */
    t_get_is(c, "resp_x", "[]");
    assert_int_equal(store_resp_get(c->s, "nope", T_CLIENT, provider, &shape, &c->items),
                     GW_E_NOT_FOUND);
    assert_string_equal(provider, "");
    assert_int_equal(c->items.len, 0);
}

static void
test_resp_multi_mb_items_round_trip(void **state)
{
    struct t_ctx *c = *state;
    size_t n = (size_t)5 << 20;
    char *big = t_big_items(n, 1);
    char *big2 = t_big_items(n + 4097, 2);

    t_open(c);
    assert_int_equal(
        store_resp_put(c->s, "resp_big", T_CLIENT, "openai-eu", T_SHAPE, t_now_ms(), big, n),
        GW_OK);
    t_get_is_n(c, "resp_big", big, n); /* from memory */
    t_flush(c->s);
    t_get_is_n(c, "resp_big", big, n); /* from LMDB's overflow pages */
    assert_int_equal(store_resp_put(c->s, "resp_big2", T_CLIENT, "openai-eu", T_SHAPE, t_now_ms(),
                                    big2, n + 4097),
                     GW_OK);
    t_reopen(c);
    t_get_is_n(c, "resp_big", big, n);
    t_get_is_n(c, "resp_big2", big2, n + 4097);
    free(big);
    free(big2);
}

static void
test_resp_put_refuses_ids_names_shapes_and_sizes_out_of_range(void **state)
{
    struct t_ctx *c = *state;
    char id[STORE_RESP_ID_MAX + 2];
    char name[GW_NAME_MAX + 2];
    struct store_stats st;
    char *huge;

    t_open(c);
    memset(id, 'i', sizeof id - 1);
    id[STORE_RESP_ID_MAX] = '\0'; /* exactly the limit: kept */
    t_put(c->s, id, 1000, "[128]");
    t_get_is(c, id, "[128]");
    id[STORE_RESP_ID_MAX] = 'i';
    id[STORE_RESP_ID_MAX + 1] = '\0'; /* one more: refused */
    assert_int_equal(store_resp_put(c->s, id, T_CLIENT, "p", 0, 1000, "[]", 2), GW_E_BAD_REQUEST);
    assert_int_equal(store_resp_put(c->s, "", T_CLIENT, "p", 0, 1000, "[]", 2), GW_E_BAD_REQUEST);
    memset(name, 'n', sizeof name - 1);
    name[GW_NAME_MAX] = '\0';
    assert_int_equal(store_resp_put(c->s, "resp_n", T_CLIENT, name, 0, 1000, "[]", 2), GW_OK);
    name[GW_NAME_MAX] = 'n';
    name[GW_NAME_MAX + 1] = '\0';
    assert_int_equal(store_resp_put(c->s, "resp_n", T_CLIENT, name, 0, 1000, "[]", 2),
                     GW_E_BAD_REQUEST);
    /* a client's name: the same limit, and never empty (a response has an owner) */
    assert_int_equal(store_resp_put(c->s, "resp_c", name, "p", 0, 1000, "[]", 2), GW_E_BAD_REQUEST);
    assert_int_equal(store_resp_put(c->s, "resp_c", "", "p", 0, 1000, "[]", 2), GW_E_BAD_REQUEST);
    name[GW_NAME_MAX] = '\0';
    assert_int_equal(store_resp_put(c->s, "resp_c", name, "p", 0, 1000, "[]", 2), GW_OK);
    assert_int_equal(store_resp_put(c->s, "resp_s", T_CLIENT, "p", -1, 1000, "[]", 2),
                     GW_E_BAD_REQUEST);
    assert_int_equal(store_resp_put(c->s, "resp_s", T_CLIENT, "p", 256, 1000, "[]", 2),
                     GW_E_BAD_REQUEST);
    assert_int_equal(store_resp_put(c->s, "resp_s", T_CLIENT, "p", 255, 1000, "[]", 2), GW_OK);
    assert_int_equal(store_resp_put(c->s, "resp_e", T_CLIENT, "", 0, 1000, NULL, 0),
                     GW_OK); /* empty */
    /* Over the items bound: refused before a byte is read (the buffer is never touched). */
    huge = malloc(STORE_RESP_ITEMS_MAX + 1);
    assert_non_null(huge);
    assert_int_equal(
        store_resp_put(c->s, "resp_h", T_CLIENT, "p", 0, 1000, huge, STORE_RESP_ITEMS_MAX + 1),
        GW_E_BODY_TOO_LARGE);
    free(huge);
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_puts, 5);
    assert_int_equal(st.resp_dropped, 1); /* the too large one; bad arguments are not counted */
    t_flush(c->s);
    assert_int_equal(t_get(c, "resp_e"), GW_OK);
    assert_int_equal(c->items.len, 0);
    assert_int_equal(t_get(c, "resp_h"), GW_E_NOT_FOUND);
}

/* A later put of an id wins, pending or committed, and retention of the earlier one's time
 * does not take the later one with it. */
static void
test_resp_later_put_of_same_id_replaces_the_earlier(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = 400 * T_DAY_MS, pruned = 0;

    t_open(c);
    t_put(c->s, "resp_r", now - 40 * T_DAY_MS, "[\"old\"]");
    t_flush(c->s);
    t_put(c->s, "resp_r", now - 1, "[\"new\"]");
    t_get_is(c, "resp_r", "[\"new\"]"); /* pending beats committed */
    t_put(c->s, "resp_r", now, "[\"newest\"]");
    t_get_is(c, "resp_r", "[\"newest\"]"); /* the newest of two pending */
    t_flush(c->s);
    t_get_is(c, "resp_r", "[\"newest\"]");
    assert_int_equal(store_prune(c->s, now, 31, &pruned), GW_OK);
    assert_int_equal(pruned, 0);
    t_get_is(c, "resp_r", "[\"newest\"]");
    assert_int_equal(store_prune(c->s, now + 32 * T_DAY_MS, 31, &pruned), GW_OK);
    assert_int_equal(pruned, 1);
    assert_int_equal(t_get(c, "resp_r"), GW_E_NOT_FOUND);
}

/* ---- retention ---- */

static void
test_resp_retention_prunes_old_entries_only(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = 400 * T_DAY_MS, pruned = 0;
    struct store_stats st;
    bool more = false;

    t_open(c);
    t_put(c->s, "resp_40d", now - 40 * T_DAY_MS, "[40]");
    t_put(c->s, "resp_31d1", now - 31 * T_DAY_MS - 1, "[31.1]");
    t_put(c->s, "resp_31d", now - 31 * T_DAY_MS, "[31]");
    t_put(c->s, "resp_now", now - 1, "[0]");
    t_flush(c->s);
    /* bounded chunks: one at a time, and it says more are due */
    assert_int_equal(store_resp_prune_chunk(c->s, now - 31 * T_DAY_MS, 1, &more, &pruned), GW_OK);
    assert_true(more);
    assert_int_equal(pruned, 1);
    assert_int_equal(t_get(c, "resp_40d"), GW_E_NOT_FOUND); /* oldest first */
    t_get_is(c, "resp_31d1", "[31.1]");
    assert_int_equal(store_prune(c->s, now, 31, &pruned), GW_OK);
    assert_int_equal(pruned, 2);
    assert_int_equal(t_get(c, "resp_31d1"), GW_E_NOT_FOUND);
    t_get_is(c, "resp_31d", "[31]");
    t_get_is(c, "resp_now", "[0]");
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_pruned, 2);
    assert_int_equal(st.rows_pruned, 0);
    /* what is left is still there after a reopen, and its index with it */
    t_reopen(c);
    pruned = 0;
    assert_int_equal(store_prune(c->s, now + T_DAY_MS, 31, &pruned), GW_OK);
    assert_int_equal(pruned, 1);
    assert_int_equal(t_get(c, "resp_31d"), GW_E_NOT_FOUND);
    t_get_is(c, "resp_now", "[0]");
}

static void
test_resp_writer_start_prunes_old_responses(void **state)
{
    struct t_ctx *c = *state;
    uint64_t now = t_now_ms();
    struct store_stats st;

    t_open(c);
    t_put(c->s, "resp_90d", now - 90 * T_DAY_MS, "[90]");
    t_put(c->s, "resp_60d", now - 60 * T_DAY_MS, "[60]");
    t_put(c->s, "resp_now", now, "[0]");
    t_flush(c->s); /* row_days 0: nothing pruned */
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_pruned, 0);
    assert_int_equal(store_writer_start(c->s, 5, 31), GW_OK);
    /* Wait for the counter (bounded, about 10 s), not for a fixed time. */
    for (unsigned i = 0; i < 10000; i++) {
        store_stats_get(c->s, &st);
        if (st.resp_pruned == 2)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    store_writer_stop(c->s);
    assert_int_equal(st.resp_pruned, 2);
    assert_int_equal(t_get(c, "resp_90d"), GW_E_NOT_FOUND);
    assert_int_equal(t_get(c, "resp_60d"), GW_E_NOT_FOUND);
    t_get_is(c, "resp_now", "[0]");
}

/* ---- bounds and failures ---- */

static void
test_resp_pending_bound_drops_and_counts(void **state)
{
    struct t_ctx *c = *state;
    struct store_stats st;
    char items[100];

    t_open(c);
    memset(items, 'x', sizeof items);
    /* room for two of these values (head 28 bytes + 100 items), not three */
    c->s->resp_pending_max =
        2 * (STORE_RESP_HEAD_FIXED + 9 + 1 + strlen(T_CLIENT) + sizeof items) + 10;
    assert_int_equal(
        store_resp_put(c->s, "resp_1", T_CLIENT, "openai-eu", 1, 1000, items, sizeof items), GW_OK);
    assert_int_equal(
        store_resp_put(c->s, "resp_2", T_CLIENT, "openai-eu", 1, 1000, items, sizeof items), GW_OK);
    assert_int_equal(
        store_resp_put(c->s, "resp_3", T_CLIENT, "openai-eu", 1, 1000, items, sizeof items),
        GW_E_STORE_QUEUE_FULL);
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_puts, 2);
    assert_int_equal(st.resp_dropped, 1);
    assert_int_equal(t_get(c, "resp_3"), GW_E_NOT_FOUND);
    /* a commit frees the room again */
    t_flush(c->s);
    assert_int_equal(c->s->resp_pending_bytes, 0);
    assert_int_equal(
        store_resp_put(c->s, "resp_3", T_CLIENT, "openai-eu", 1, 1000, items, sizeof items), GW_OK);
    t_flush(c->s);
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_committed, 3);
    assert_int_equal(t_get(c, "resp_3"), GW_OK);
}

/* A response the map cannot hold is dropped on its own: the rows of its batch commit. */
static void
test_resp_map_full_drops_the_response_not_the_rows(void **state)
{
    struct t_ctx *c = *state;
    size_t n = (size_t)2 << 20;
    char *big = t_big_items(n, 3);
    struct gw_row *row = gw_calloc(1, sizeof *row);
    struct store_stats st;
    struct gw_row got[2];
    struct store_cursor next;
    size_t nrows;
    char err[256];

    assert_non_null(row);
    assert_int_equal(store_open(c->path, 1, &c->s, err, sizeof err), GW_OK);
    strcpy(row->id, "r1");
    row->ts_ms = 1000;
    strcpy(row->client, "alice");
    assert_int_equal(store_row_submit(c->s, row), GW_OK);
    gw_free(row);
    assert_int_equal(store_resp_put(c->s, "resp_big", T_CLIENT, "p", 0, 1000, big, n), GW_OK);
    t_put(c->s, "resp_small", 1000, "[]"); /* same batch: dropped with it */
    t_flush(c->s);
    store_stats_get(c->s, &st);
    assert_int_equal(st.rows_committed, 1);
    assert_int_equal(st.rows_dropped, 0);
    assert_int_equal(st.resp_committed, 0);
    assert_int_equal(st.resp_dropped, 2);
    assert_int_equal(store_rows_page(c->s, &(struct store_cursor){0}, got, 2, &nrows, &next),
                     GW_OK);
    assert_int_equal(nrows, 1);
    assert_string_equal(got[0].id, "r1");
    assert_int_equal(t_get(c, "resp_big"), GW_E_NOT_FOUND);
    assert_int_equal(c->s->resp_pending_bytes, 0);
    /* the writer goes on: a response that fits is kept */
    t_put(c->s, "resp_after", 1000, "[1]");
    t_flush(c->s);
    t_get_is(c, "resp_after", "[1]");
    free(big);
}

/* A sync wakes a writer that would sleep a minute, and returns once the puts before it
 * are in LMDB. */
static void
test_resp_sync_returns_once_puts_before_it_are_committed(void **state)
{
    struct t_ctx *c = *state;

    t_open(c);
    assert_int_equal(store_writer_start(c->s, 60000, 0), GW_OK);
    assert_true(store_sync(c->s, 1000));
    t_put(c->s, "resp_s1", t_now_ms(), "[1]");
    t_put(c->s, "resp_s2", t_now_ms(), "[2]");
    assert_true(store_sync(c->s, 30000));
    assert_true(t_committed(c->s, "resp_s1"));
    assert_true(t_committed(c->s, "resp_s2"));
    store_writer_stop(c->s);
}

/* ---- concurrency ---- */

#define T_READERS 3
#define T_PUTS 3000

struct t_shared {
    struct store *s;
    _Atomic unsigned published; /* ids below it were put (store_resp_put returned) */
    _Atomic bool done;
};

struct t_reader {
    struct t_shared *sh;
    unsigned seed;
    unsigned gets, wrong;
};

/* The items of put <i>: its number, then filler; every tenth one above 2 KiB, so LMDB
 * writes it in overflow pages. */
static size_t
t_items_of(unsigned i, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[{\"i\":%u}", i);
    size_t want = i % 10 == 0 ? 6000 + i % 997 : 40 + i % 113;

    for (; n < want && n + 1 < cap; n++)
        buf[n] = (char)('a' + (i + n) % 26);
    buf[n++] = ']';
    return n;
}

static void *
t_produce(void *arg)
{
    struct t_shared *sh = arg;
    char id[32], items[8192];

    for (unsigned i = 0; i < T_PUTS; i++) {
        size_t n = t_items_of(i, items, sizeof items);

        snprintf(id, sizeof id, "resp_%u", i);
        if (store_resp_put(sh->s, id, T_CLIENT, "openai-eu", (int)(i % 5), 1000 + i, items, n) !=
            GW_OK)
            break; /* the readers then find fewer published; the test checks the count */
        /* release: a reader that sees <published> > i may look <id> up */
        atomic_store_explicit(&sh->published, i + 1, memory_order_release);
    }
    atomic_store_explicit(&sh->done, true, memory_order_release);
    return NULL;
}

/* Checks one get of put <i>; false when it is missing or wrong. */
static bool
t_check(struct store *s, unsigned i, struct gw_buf *got)
{
    char id[32], want[8192], provider[GW_NAME_MAX + 1];
    size_t n = t_items_of(i, want, sizeof want);
    int shape = -1;

    snprintf(id, sizeof id, "resp_%u", i);
    if (store_resp_get(s, id, T_CLIENT, provider, &shape, got) != GW_OK)
        return false;
    return got->len == n && memcmp(got->data, want, n) == 0 && shape == (int)(i % 5) &&
           strcmp(provider, "openai-eu") == 0;
}

static void *
t_read(void *arg)
{
    struct t_reader *r = arg;
    struct gw_buf got = {0};
    uint32_t x = r->seed;
    bool last = false;

    /* Until the producer is done, then one more pass over everything it published. */
    while (!last) {
        unsigned pub;

        last = atomic_load_explicit(&r->sh->done, memory_order_acquire);
        pub = atomic_load_explicit(&r->sh->published, memory_order_acquire);
        if (pub == 0)
            continue;
        for (unsigned k = 0; k < 64; k++) {
            x = x * 1664525u + 1013904223u;
            /* mostly the newest puts (in the table or just committed), some older */
            unsigned i = k % 2 ? pub - 1 - (x >> 8) % (pub < 8 ? pub : 8) : (x >> 8) % pub;

            r->gets++;
            if (!t_check(r->sh->s, i, &got))
                r->wrong++;
        }
    }
    gw_buf_fini(&got);
    return NULL;
}

static void
test_resp_gets_from_threads_while_the_writer_commits(void **state)
{
    struct t_ctx *c = *state;
    struct t_shared sh = {0};
    struct t_reader rd[T_READERS];
    pthread_t prod, th[T_READERS];
    struct store_stats st;

    t_open(c);
    sh.s = c->s;
    assert_int_equal(store_writer_start(c->s, 1, 0), GW_OK);
    for (unsigned t = 0; t < T_READERS; t++) {
        rd[t] = (struct t_reader){.sh = &sh, .seed = 7 + t};
        assert_int_equal(pthread_create(&th[t], NULL, t_read, &rd[t]), 0);
    }
    assert_int_equal(pthread_create(&prod, NULL, t_produce, &sh), 0);
    /* every thread joined before an assertion can leave the test */
    pthread_join(prod, NULL);
    for (unsigned t = 0; t < T_READERS; t++)
        pthread_join(th[t], NULL);
    store_writer_stop(c->s);
    assert_int_equal(atomic_load(&sh.published), T_PUTS);
    for (unsigned t = 0; t < T_READERS; t++) {
        assert_true(rd[t].gets > 0);
        assert_int_equal(rd[t].wrong, 0);
    }
    store_stats_get(c->s, &st);
    assert_int_equal(st.resp_committed, T_PUTS);
    assert_int_equal(st.resp_dropped, 0);
    assert_true(st.batches > 1); /* the gets did run across commits */
    for (unsigned i = 0; i < T_PUTS; i += 97)
        assert_true(t_check(c->s, i, &c->items));
}

#define T_TEST(f) cmocka_unit_test_setup_teardown(f, t_setup, t_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_head_round_trip_and_truncation),
        cmocka_unit_test(test_resp_head_with_appended_field_still_reads),
        cmocka_unit_test(test_resp_head_of_version_1_reads_with_no_client),
        T_TEST(test_resp_get_sees_a_put_before_its_batch_commits),
        T_TEST(test_resp_get_is_for_the_client_that_made_it_only),
        T_TEST(test_resp_get_follows_the_client_s_renames),
        T_TEST(test_resp_version_1_value_is_found_for_no_client),
        T_TEST(test_resp_survives_close_and_reopen),
        T_TEST(test_resp_unknown_and_impossible_ids_are_not_found),
        T_TEST(test_resp_multi_mb_items_round_trip),
        T_TEST(test_resp_put_refuses_ids_names_shapes_and_sizes_out_of_range),
        T_TEST(test_resp_later_put_of_same_id_replaces_the_earlier),
        T_TEST(test_resp_retention_prunes_old_entries_only),
        T_TEST(test_resp_writer_start_prunes_old_responses),
        T_TEST(test_resp_pending_bound_drops_and_counts),
        T_TEST(test_resp_map_full_drops_the_response_not_the_rows),
        T_TEST(test_resp_sync_returns_once_puts_before_it_are_committed),
        T_TEST(test_resp_gets_from_threads_while_the_writer_commits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
