/* SPDX-License-Identifier: MIT
 * net/settle.c - a worker's settlements, applied once per loop turn.
 *
 * A request that ends settles its key-limit reservation (DESIGN.md 8) and its
 * credential's quota lease (DESIGN.md 10): each a locked pass over the key's or the
 * set's lines. With two workers serving one key, those lines travel between the CPUs
 * for every request (docs/perf.md: the settlements were most of what the admission path
 * cost with two workers). A loop turn ends several requests (about six at 64
 * connections), so the worker keeps their settlements and applies them at the turn's
 * end, one lock per key and per set (gw_keylimits_settle_all, gw_quota_settle_all).
 *
 * What a client sees does not change: a client that has read its answer finds the
 * limits settled (net_stream_settle's promise). Every byte for a client written while
 * the worker holds settlements waits in its connection's cork and leaves after them;
 * settlements are applied before anything else another request could see: a slot given
 * to a waiter (net_slots_granted), frames sent on HTTP/2 (their bytes do not go through
 * the cork), a connection closed or half-closed (net_conn_uncork), the worker's end.
 * Until then the request counts as it did while it ran: in flight, for a few
 * microseconds more.
 *
 * Threads: a worker's own; only the worker that keeps a settlement applies it.
 * See:     net/net-priv.h (struct net_settles), net/worker.c (the turn's end),
 *          net/http1.c (the cork)
 */
#include "net/net-priv.h"

#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "net/logger.h"
#include "net/pipeline-priv.h"
#include "store/store.h"

void
net_settle_limits(struct net_worker *w, struct gw_keylimits *k, struct gw_limit_reservation *res,
                  const struct gw_usage *u, int64_t cost_micros, bool reached_upstream,
                  uint64_t conn_id, const char *req_id)
{
    struct net_settles *st = &w->settles;
    struct gw_limit_settlement *x;

    if (!res->active)
        return;
    if (st->n_lim == NET_SETTLE_MAX)
        net_settle_apply(w);
    x = &st->lim[st->n_lim];
    x->k = k;
    x->res = *res;
    x->now_ms = net_now_ms();
    x->usage = *u;
    x->cost_micros = cost_micros;
    x->reached_upstream = reached_upstream;
    {
        size_t len = req_id ? strnlen(req_id, GW_ROW_ID_LEN) : 0;

        st->who[st->n_lim].conn = conn_id;
        memcpy(st->who[st->n_lim].req, req_id ? req_id : "", len);
        st->who[st->n_lim].req[len] = '\0';
    }
    st->n_lim++;
    res->active = false;
}

void
net_settle_quota(struct net_worker *w, struct gw_quota_set *set, struct gw_quota_lease *lease,
                 uint64_t real_tokens, bool sent)
{
    struct net_settles *st = &w->settles;
    struct gw_quota_settlement *x;

    if (!set || !lease->active)
        return;
    if (st->n_quota == NET_SETTLE_MAX)
        net_settle_apply(w);
    x = &st->quota[st->n_quota++];
    x->set = set;
    x->lease = *lease;
    x->now_ms = net_now_ms();
    x->real_tokens = real_tokens;
    x->sent = sent;
    lease->active = false;
}

void
net_settle_apply(struct net_worker *w)
{
    struct net_settles *st = &w->settles;
    struct gw_keylimits *keys[NET_SETTLE_MAX];
    unsigned who[NET_SETTLE_MAX], n_keys = 0, i, j;

    if (st->n_quota) {
        gw_quota_settle_all(st->quota, st->n_quota);
        st->n_quota = 0;
    }
    if (!st->n_lim)
        return;
    /* The keys, each with its last request (the context of its alerts). */
    for (i = 0; i < st->n_lim; i++) {
        for (j = 0; j < n_keys && keys[j] != st->lim[i].k; j++)
            ;
        if (j == n_keys)
            keys[n_keys++] = st->lim[i].k;
        who[j] = i;
    }
    gw_keylimits_settle_all(st->lim, st->n_lim);
    st->n_lim = 0;
    for (j = 0; j < n_keys; j++) {
        if (gw_keylimits_has_alerts(keys[j])) {
            struct gw_log_ctx ctx = {(int)w->id, st->who[who[j]].conn,
                                     st->who[who[j]].req[0] ? st->who[who[j]].req : NULL};

            net_key_alerts_emit(keys[j], &ctx);
        }
    }
}

bool
net_settle_row(struct net_worker *w, struct gw_row *row)
{
    struct net_settles *st = &w->settles;

    if (!net_settle_pending(w) || st->n_rows == NET_SETTLE_MAX)
        return false;
    st->rows[st->n_rows++] = row;
    return true;
}

struct gw_row *
net_settle_spare_row(struct net_worker *w)
{
    struct net_settles *st = &w->settles;

    return st->n_spare ? st->spare[--st->n_spare] : NULL;
}

void
net_settle_turn_end(struct net_worker *w)
{
    struct net_settles *st = &w->settles;
    struct net_conn *c;
    unsigned i;

    net_settle_apply(w);
    /* Each connection leaves the list before its bytes are written: a write that fails
     * may close it. */
    while ((c = st->corked) != NULL)
        net_conn_uncork(c);
    for (i = 0; i < st->n_rows; i++) {
        if (w->store)
            store_row_submit(w->store, st->rows[i]); /* a copy */
        if (st->n_spare < NET_SETTLE_MAX)
            st->spare[st->n_spare++] = st->rows[i];
        else
            gw_free(st->rows[i]);
    }
    st->n_rows = 0;
}
