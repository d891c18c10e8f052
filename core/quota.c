/* SPDX-License-Identifier: MIT
 * core/quota.c - credential units, their windows, leases, choice, cooldowns and probes.
 * One gw_spin per set guards every unit of it (see core/quota.h for the contract).
 * Owns:    the registry owns its sets (a chain per hash bucket, never unlinked before
 *          gw_quota_reg_free); a set owns its units (inline).
 * Threads: any; the set lock is held for a bounded scan, never across an allocation.
 * See:     core/quota.h, tests/unit/core/test_quota.c
 */
#include "core/quota.h"

#include <stdio.h>
#include <string.h>

#include <openssl/sha.h>

#include "core/alloc.h"
#include "core/spin.h"

#define Q_MIN_SECS 60
#define Q_LEASE_SLOTS 128 /* > TTL in seconds, so a slot is swept before it is reused */
#define Q_REG_BUCKETS 256
#define Q_NAME_MAX 128

static const uint64_t q_day_ladder_ms[] = {120000, 600000, 3600000, GW_QUOTA_DAY_MS};
static const uint64_t q_unknown_ladder_ms[] = {GW_QUOTA_TRANSIENT_MS, 120000,
                                               GW_QUOTA_UNKNOWN_CAP_MS};
static const uint64_t q_probe_backoff_ms[] = {120000, 240000, 480000, 900000};

#define Q_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sliding minute: bucket i holds second sec[i] (valid while sec[i] > last - 60). */
struct q_minute {
    uint64_t last; /* latest second seen; time only moves forward */
    uint64_t sec[Q_MIN_SECS];
    uint64_t req[Q_MIN_SECS];
    uint64_t tok[Q_MIN_SECS];
    uint64_t req_sum, tok_sum;
};

struct q_lease_slot {
    uint64_t sec;
    uint32_t open;
};

struct q_unit {
    char fp[GW_QUOTA_FP_LEN + 1];
    /* Set (under the lock) when the unit is as a success leaves it: seen, no hits, no
     * ladder step, no 429 remembered, no failed probe; cleared under the lock by what
     * changes one of those. Read without the lock (__atomic) by gw_quota_success, which
     * then has nothing to write: the common answer writes no line of the set. Kept
     * beside fp, a line the requests only read. */
    bool quiet;
    struct q_minute min;
    uint64_t day, day_req, day_tok;
    struct gw_quota_learned learned[GW_QUOTA_WINS];
    uint64_t held_until[GW_QUOTA_WINS]; /* upstream said remaining 0 until */
    struct q_lease_slot lease[Q_LEASE_SLOTS];
    uint32_t open_leases;
    uint64_t leases_dropped;
    bool seen;
    /* cooldown and ladders */
    struct gw_quota_cooldown cool;
    unsigned day_step;     /* next day-ladder step */
    uint64_t day_first_ms; /* first hit of the current rolling day */
    unsigned unknown_step; /* next unknown-limits step */
    uint64_t last_429_ms;  /* for "two 429s within an hour" */
    unsigned probe_fails;
    uint64_t probe_next_ms;
};

struct gw_quota_set {
    struct gw_spin lock;
    struct gw_quota_set_conf conf;
    size_t n;
    size_t turn; /* the unit after the last chosen */
    char provider[Q_NAME_MAX + 1], model[Q_NAME_MAX + 1];
    struct gw_quota_set *next; /* registry chain; immutable once published */
    struct q_unit u[];
};

struct gw_quota_reg {
    struct gw_spin lock;
    size_t n_sets; /* under lock */
    struct gw_quota_set *heads[Q_REG_BUCKETS];
};

/* ---- fingerprint and config ---- */

void
gw_quota_fingerprint(const char *secret, size_t len, char out[GW_QUOTA_FP_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[SHA256_DIGEST_LENGTH];

    SHA256((const unsigned char *)secret, len, d);
    for (size_t i = 0; i < GW_QUOTA_FP_LEN / 2; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[GW_QUOTA_FP_LEN] = '\0';
}

/* A dotted IPv4 literal into <a>; false when <s> is not one. (inet_pton is an I/O header's
 * function as far as check-deps goes, and four numbers are quick to read.) */
static bool
q_ipv4(const char *s, unsigned char a[4])
{
    for (int k = 0; k < 4; k++) {
        unsigned v = 0, digits = 0;

        while (*s >= '0' && *s <= '9' && digits < 4) {
            v = v * 10 + (unsigned)(*s++ - '0');
            digits++;
        }
        if (!digits || v > 255 || *s != (k < 3 ? '.' : '\0'))
            return false;
        a[k] = (unsigned char)v;
        s += k < 3;
    }
    return true;
}

bool
gw_quota_host_is_local(const char *host)
{
    unsigned char a[4];

    if (!host)
        return false;
    if (strcmp(host, "localhost") == 0)
        return true;
    if (strchr(host, ':')) {
        const char *last = strrchr(host, ':');
        unsigned v = 0;

        if (strcmp(host, "::1") == 0)
            return true;
        if (strchr(last, '.')) /* ::ffff:10.0.0.1 */
            return q_ipv4(last + 1, a) && gw_quota_host_is_local(last + 1);
        for (const char *p = host; *p && *p != ':'; p++) {
            char c = *p;

            if (c >= 'A' && c <= 'F')
                c = (char)(c + 32);
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) || v > 0xfff)
                return false;
            v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        /* fc00::/7 unique local, fe80::/10 link local */
        return (v & 0xfe00) == 0xfc00 || (v & 0xffc0) == 0xfe80;
    }
    if (!q_ipv4(host, a))
        return false;
    return a[0] == 127 || a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
           (a[0] == 192 && a[1] == 168) || (a[0] == 169 && a[1] == 254);
}

void
gw_quota_set_conf_of(const struct gw_conf_provider *p, const char *model,
                     struct gw_quota_set_conf *out)
{
    const struct gw_conf_quota_win *d = &p->quota_default;

    memset(out, 0, sizeof(*out));
    out->limit[GW_QUOTA_RPM] = d->rpm;
    out->limit[GW_QUOTA_TPM] = d->tpm;
    out->limit[GW_QUOTA_RPD] = d->rpd;
    out->limit[GW_QUOTA_TPD] = d->tpd;
    for (size_t i = 0; model && i < p->n_quota_models; i++) {
        const struct gw_conf_quota_win *w = &p->quota_models[i].win;

        if (strcmp(p->quota_models[i].model, model) != 0)
            continue;
        /* An override replaces the default axis by axis; an axis it does not write keeps
         * the default. */
        if (w->rpm)
            out->limit[GW_QUOTA_RPM] = w->rpm;
        if (w->tpm)
            out->limit[GW_QUOTA_TPM] = w->tpm;
        if (w->rpd)
            out->limit[GW_QUOTA_RPD] = w->rpd;
        if (w->tpd)
            out->limit[GW_QUOTA_TPD] = w->tpd;
    }
    out->local = gw_quota_host_is_local(p->host);
    out->local_cap_ms = (uint64_t)p->quota_local_cap_secs * 1000;
}

uint64_t
gw_quota_usage_tokens(const struct gw_usage *u)
{
    if (!u)
        return 0;
    return u->input_tokens + u->cache_read_tokens + u->cache_write_tokens + u->output_tokens;
}

/* ---- windows ---- */

static void
q_minute_advance(struct q_minute *m, uint64_t now_s)
{
    uint64_t from;

    if (now_s <= m->last)
        return;
    from = now_s - m->last >= Q_MIN_SECS ? now_s - (Q_MIN_SECS - 1) : m->last + 1;
    if (now_s - m->last >= Q_MIN_SECS) {
        memset(m->req, 0, sizeof(m->req));
        memset(m->tok, 0, sizeof(m->tok));
        m->req_sum = m->tok_sum = 0;
    }
    for (uint64_t s = from; s <= now_s; s++) {
        size_t i = s % Q_MIN_SECS;

        m->req_sum -= m->req[i];
        m->tok_sum -= m->tok[i];
        m->req[i] = m->tok[i] = 0;
        m->sec[i] = s;
    }
    m->last = now_s;
}

/* True when second <s> is still counted by the window. */
static bool
q_minute_holds(const struct q_minute *m, uint64_t s)
{
    return s + Q_MIN_SECS > m->last && m->sec[s % Q_MIN_SECS] == s;
}

static void
q_unit_advance(struct q_unit *u, uint64_t now_ms)
{
    uint64_t day = now_ms / GW_QUOTA_DAY_MS;

    q_minute_advance(&u->min, now_ms / 1000);
    if (day > u->day) {
        u->day = day;
        u->day_req = u->day_tok = 0;
    }
}

static uint64_t
q_limit(const struct gw_quota_set *s, const struct q_unit *u, enum gw_quota_win w)
{
    uint64_t c = s->conf.limit[w], l = u->learned[w].limit;

    if (!c)
        return l;
    return l && l < c ? l : c;
}

static uint64_t
q_used(const struct q_unit *u, enum gw_quota_win w)
{
    switch (w) {
    case GW_QUOTA_RPM: return u->min.req_sum;
    case GW_QUOTA_TPM: return u->min.tok_sum;
    case GW_QUOTA_RPD: return u->day_req;
    default: return u->day_tok;
    }
}

/* When the minute window, holding <used> with limit <lim>, admits <need>: the end of the
 * second whose leaving frees enough. */
static uint64_t
q_minute_frees_at(const struct q_minute *m, bool tokens, uint64_t used, uint64_t lim, uint64_t need)
{
    uint64_t freed = 0;

    for (uint64_t s = m->last + 1 - Q_MIN_SECS; s <= m->last; s++) {
        size_t i = s % Q_MIN_SECS;

        if (m->sec[i] != s)
            continue;
        freed += tokens ? m->tok[i] : m->req[i];
        if (used - freed == 0 || used - freed + need <= lim)
            return (s + Q_MIN_SECS) * 1000;
    }
    return (m->last + Q_MIN_SECS) * 1000;
}

/* Whether unit <u> admits <need> on every window; else the first full window in <*w> and
 * when it admits in <*at>. Fills <*ppm> with its headroom. */
static bool
q_unit_admits(const struct gw_quota_set *s, const struct q_unit *u, uint64_t now_ms, uint64_t est,
              enum gw_quota_win *w, uint64_t *at, uint32_t *ppm)
{
    uint64_t worst = 0; /* parts per million used */
    bool ok = true;

    *at = 0;
    for (int k = 0; k < GW_QUOTA_WINS; k++) {
        enum gw_quota_win win = (enum gw_quota_win)k;
        uint64_t lim = q_limit(s, u, win), used = q_used(u, win);
        uint64_t need = (win == GW_QUOTA_RPM || win == GW_QUOTA_RPD) ? 1 : est;
        uint64_t frees = 0, r;

        if (u->held_until[k] > now_ms)
            frees = u->held_until[k];
        else if (lim && used && used + need > lim)
            frees = k < GW_QUOTA_RPD
                        ? q_minute_frees_at(&u->min, win == GW_QUOTA_TPM, used, lim, need)
                        : (u->day + 1) * GW_QUOTA_DAY_MS;
        if (frees) {
            if (ok || frees > *at) {
                *w = win;
                *at = frees;
            }
            ok = false;
            continue;
        }
        if (!lim)
            continue; /* an unknown limit does not count towards headroom */
        /* in double: a token count times 1e6 may not fit 64 bits */
        r = used >= lim ? 1000000 : (uint64_t)((double)used / (double)lim * 1e6);
        if (!u->seen && r < 500000)
            r = 500000; /* never seen answering: counts as half used */
        if (r > worst)
            worst = r;
    }
    *ppm = (uint32_t)(1000000 - worst);
    return ok;
}

static bool
q_unit_cooling(const struct q_unit *u, uint64_t now_ms)
{
    return u->cool.source != GW_QUOTA_SRC_NONE && u->cool.until_ms > now_ms;
}

/* The decision of choose and peek, under the lock. */
static int
q_decide(struct gw_quota_set *s, uint64_t now_ms, uint64_t est, struct gw_quota_choice *c)
{
    uint32_t best = 0;
    int chosen = -1;

    c->n = s->n;
    c->retry_at_ms = 0;
    for (size_t k = 0; k < s->n; k++) {
        /* Round robin: scan from the turn, and only a strictly better headroom displaces
         * the first found, so equal units take turns. */
        size_t i = (s->turn + k) % s->n;
        struct q_unit *u = &s->u[i];
        struct gw_quota_verdict *v = &c->v[i];
        uint64_t at;

        memset(v, 0, sizeof(*v));
        q_unit_advance(u, now_ms);
        if (q_unit_cooling(u, now_ms)) {
            enum gw_quota_win w;
            uint32_t ppm;

            v->skip = GW_QUOTA_SKIP_COOLING;
            v->cool = u->cool;
            v->frees_at_ms = u->cool.until_ms;
            /* A window that is also full and frees later decides when this unit admits
             * (counted as it stands now: nothing else frees it sooner). */
            if (!q_unit_admits(s, u, now_ms, est, &w, &at, &ppm) && at > v->frees_at_ms)
                v->frees_at_ms = at;
        } else if (!q_unit_admits(s, u, now_ms, est, &v->win, &at, &v->headroom_ppm)) {
            v->skip = GW_QUOTA_SKIP_WINDOW_FULL;
            v->frees_at_ms = at;
        } else {
            v->skip = GW_QUOTA_SKIP_HEADROOM;
            if (chosen < 0 || v->headroom_ppm > best) {
                chosen = (int)i;
                best = v->headroom_ppm;
            }
            continue;
        }
        if (!c->retry_at_ms || v->frees_at_ms < c->retry_at_ms)
            c->retry_at_ms = v->frees_at_ms;
    }
    if (chosen >= 0) {
        c->v[chosen].skip = GW_QUOTA_CHOSEN;
        c->retry_at_ms = 0;
    }
    c->chosen = chosen;
    return chosen;
}

/* The open-lease slot of second <sec>; a slot still holding an older second is swept
 * first (its leases outlived the TTL). */
static struct q_lease_slot *
q_lease_slot(struct q_unit *u, uint64_t sec)
{
    struct q_lease_slot *sl = &u->lease[sec % Q_LEASE_SLOTS];

    if (sl->sec != sec) {
        u->leases_dropped += sl->open;
        u->open_leases -= sl->open;
        sl->open = 0;
        sl->sec = sec;
    }
    return sl;
}

static void
q_count(struct q_unit *u, uint64_t sec, uint64_t day, uint64_t reqs, uint64_t toks)
{
    if (q_minute_holds(&u->min, sec)) {
        size_t b = sec % Q_MIN_SECS;

        u->min.req[b] += reqs;
        u->min.tok[b] += toks;
        u->min.req_sum += reqs;
        u->min.tok_sum += toks;
    }
    if (day == u->day) {
        u->day_req += reqs;
        u->day_tok += toks;
    }
}

/* Takes back up to <reqs>/<toks> from where a lease counted (never below zero). */
static void
q_uncount(struct q_unit *u, uint64_t sec, uint64_t day, uint64_t reqs, uint64_t toks)
{
    if (q_minute_holds(&u->min, sec)) {
        size_t b = sec % Q_MIN_SECS;
        uint64_t r = reqs < u->min.req[b] ? reqs : u->min.req[b];
        uint64_t t = toks < u->min.tok[b] ? toks : u->min.tok[b];

        u->min.req[b] -= r;
        u->min.tok[b] -= t;
        u->min.req_sum -= r;
        u->min.tok_sum -= t;
    }
    if (day == u->day) {
        u->day_req -= reqs < u->day_req ? reqs : u->day_req;
        u->day_tok -= toks < u->day_tok ? toks : u->day_tok;
    }
}

/* ---- sets ---- */

struct gw_quota_set *
gw_quota_set_new(const char (*fps)[GW_QUOTA_FP_LEN + 1], size_t n,
                 const struct gw_quota_set_conf *c)
{
    struct gw_quota_set *s;

    if (n == 0 || n > GW_QUOTA_MAX_CREDS)
        return NULL;
    s = gw_calloc(1, sizeof(*s) + n * sizeof(struct q_unit));
    if (!s)
        return NULL;
    s->n = n;
    s->conf = *c;
    for (size_t i = 0; i < n; i++)
        memcpy(s->u[i].fp, fps[i], GW_QUOTA_FP_LEN + 1);
    return s;
}

void
gw_quota_set_free(struct gw_quota_set *s)
{
    gw_free(s);
}

void
gw_quota_set_configure(struct gw_quota_set *s, const struct gw_quota_set_conf *c)
{
    gw_spin_lock(&s->lock);
    s->conf = *c;
    gw_spin_unlock(&s->lock);
}

size_t
gw_quota_set_size(const struct gw_quota_set *s)
{
    return s->n;
}

int
gw_quota_set_find(const struct gw_quota_set *s, const char *fp)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->u[i].fp, fp) == 0)
            return (int)i;
    return -1;
}

int
gw_quota_choose(struct gw_quota_set *s, uint64_t now_ms, uint64_t est_tokens,
                struct gw_quota_lease *lease, struct gw_quota_choice *why)
{
    struct gw_quota_choice local;
    struct gw_quota_choice *c = why ? why : &local;
    int i;

    memset(lease, 0, sizeof(*lease));
    gw_spin_lock(&s->lock);
    i = q_decide(s, now_ms, est_tokens, c);
    if (i >= 0) {
        struct q_unit *u = &s->u[i];
        struct q_lease_slot *sl;

        lease->active = true;
        lease->unit = (uint8_t)i;
        lease->sec = u->min.last; /* a clock behind the window counts at its latest second */
        lease->day = u->day;
        lease->est_tokens = est_tokens;
        lease->open_sec = lease->sec;
        q_count(u, lease->sec, lease->day, 1, est_tokens);
        sl = q_lease_slot(u, lease->open_sec);
        sl->open++;
        u->open_leases++;
        s->turn = ((size_t)i + 1) % s->n;
    }
    gw_spin_unlock(&s->lock);
    return i;
}

int
gw_quota_peek(struct gw_quota_set *s, uint64_t now_ms, uint64_t est_tokens,
              struct gw_quota_choice *why)
{
    struct gw_quota_choice local;
    int i;

    /* Advancing the windows changes no count that matters (it only forgets what left
     * them), so a peek reads the same state the next choose will. */
    gw_spin_lock(&s->lock);
    i = q_decide(s, now_ms, est_tokens, why ? why : &local);
    gw_spin_unlock(&s->lock);
    return i;
}

/* Closes the lease's open-lease slot unless the sweep already dropped it. */
static void
q_lease_close(struct q_unit *u, const struct gw_quota_lease *l)
{
    struct q_lease_slot *sl = &u->lease[l->open_sec % Q_LEASE_SLOTS];

    if (sl->sec == l->open_sec && sl->open) {
        sl->open--;
        u->open_leases--;
    }
}

/* One settlement, <s> locked: gw_quota_settle's work. */
static void
q_settle_locked(struct gw_quota_set *s, const struct gw_quota_lease *lease, uint64_t now_ms,
                uint64_t real_tokens, bool sent)
{
    struct q_unit *u = &s->u[lease->unit];

    q_unit_advance(u, now_ms);
    q_lease_close(u, lease);
    if (!sent)
        q_uncount(u, lease->sec, lease->day, 1, lease->est_tokens);
    else if (real_tokens >= lease->est_tokens)
        q_count(u, lease->sec, lease->day, 0, real_tokens - lease->est_tokens);
    else
        q_uncount(u, lease->sec, lease->day, 0, lease->est_tokens - real_tokens);
}

void
gw_quota_settle(struct gw_quota_set *s, struct gw_quota_lease *lease, uint64_t now_ms,
                uint64_t real_tokens, bool sent)
{
    if (!lease->active || lease->unit >= s->n)
        return;
    gw_spin_lock(&s->lock);
    q_settle_locked(s, lease, now_ms, real_tokens, sent);
    gw_spin_unlock(&s->lock);
    lease->active = false;
}

void
gw_quota_settle_all(struct gw_quota_settlement *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct gw_quota_set *s = v[i].set;

        if (!s)
            continue;
        gw_spin_lock(&s->lock);
        for (size_t j = i; j < n; j++) {
            struct gw_quota_settlement *x = &v[j];

            if (x->set != s)
                continue;
            if (x->lease.active && x->lease.unit < s->n)
                q_settle_locked(s, &x->lease, x->now_ms, x->real_tokens, x->sent);
            x->lease.active = false;
            x->set = NULL;
        }
        gw_spin_unlock(&s->lock);
    }
}

void
gw_quota_lease_keep(struct gw_quota_set *s, struct gw_quota_lease *lease, uint64_t now_ms)
{
    uint64_t now_s = now_ms / 1000;
    struct q_unit *u;

    if (!lease->active || lease->unit >= s->n || now_s <= lease->open_sec)
        return;
    u = &s->u[lease->unit];
    gw_spin_lock(&s->lock);
    {
        struct q_lease_slot *old = &u->lease[lease->open_sec % Q_LEASE_SLOTS];

        /* Kept after a drop: it is open again (it was counted as dropped once). */
        if (old->sec == lease->open_sec && old->open) {
            old->open--;
            u->open_leases--;
        }
        lease->open_sec = now_s;
        q_lease_slot(u, now_s)->open++;
        u->open_leases++;
    }
    gw_spin_unlock(&s->lock);
}

size_t
gw_quota_sweep(struct gw_quota_set *s, uint64_t now_ms)
{
    uint64_t now_s = now_ms / 1000, ttl_s = GW_QUOTA_LEASE_TTL_MS / 1000;
    size_t dropped = 0;

    gw_spin_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++) {
        struct q_unit *u = &s->u[i];

        for (size_t k = 0; k < Q_LEASE_SLOTS; k++) {
            struct q_lease_slot *sl = &u->lease[k];

            if (sl->open && sl->sec + ttl_s <= now_s) {
                dropped += sl->open;
                u->leases_dropped += sl->open;
                u->open_leases -= sl->open;
                sl->open = 0;
            }
        }
    }
    gw_spin_unlock(&s->lock);
    return dropped;
}

/* ---- outcomes ---- */

bool
gw_quota_success(struct gw_quota_set *s, size_t i, uint64_t now_ms)
{
    struct q_unit *u;
    bool had;

    (void)now_ms;
    if (i >= s->n)
        return false;
    u = &s->u[i];
    /* A success racing a failure is ordered before it: as if it had taken the lock
     * first. */
    if (__atomic_load_n(&u->quiet, __ATOMIC_ACQUIRE))
        return false;
    gw_spin_lock(&s->lock);
    had = u->cool.hits != 0;
    u->seen = true;
    u->cool.hits = 0;
    u->day_step = 0;
    u->unknown_step = 0;
    u->last_429_ms = 0;
    u->probe_fails = 0;
    __atomic_store_n(&u->quiet, true, __ATOMIC_RELEASE);
    gw_spin_unlock(&s->lock);
    return had;
}

static void
q_learn_locked(struct q_unit *u, uint64_t now_ms, const struct gw_quota_facts *f)
{
    for (size_t k = 0; k < f->n && k < GW_QUOTA_MAX_FACTS; k++) {
        const struct gw_quota_fact *x = &f->f[k];

        if ((unsigned)x->win >= GW_QUOTA_WINS)
            continue;
        if (x->limit) {
            struct gw_quota_learned *l = &u->learned[x->win];

            l->limit = x->limit;
            l->at_ms = now_ms;
            memcpy(l->origin, x->origin, sizeof(l->origin));
            l->origin[GW_QUOTA_ORIGIN_MAX] = '\0';
        }
        if (x->remaining == 0 && x->reset_ms) {
            uint64_t r = x->reset_ms > GW_QUOTA_DAY_MS ? GW_QUOTA_DAY_MS : x->reset_ms;

            if (now_ms + r > u->held_until[x->win])
                u->held_until[x->win] = now_ms + r;
        }
    }
}

void
gw_quota_learn_apply(struct gw_quota_set *s, size_t i, uint64_t now_ms,
                     const struct gw_quota_facts *f)
{
    if (i >= s->n || !f)
        return;
    gw_spin_lock(&s->lock);
    q_learn_locked(&s->u[i], now_ms, f);
    gw_spin_unlock(&s->lock);
}

void
gw_quota_learned_restore(struct gw_quota_set *s, size_t i, enum gw_quota_win w,
                         const struct gw_quota_learned *l)
{
    if (i >= s->n || (unsigned)w >= GW_QUOTA_WINS)
        return;
    gw_spin_lock(&s->lock);
    s->u[i].learned[w] = *l;
    s->u[i].learned[w].origin[GW_QUOTA_ORIGIN_MAX] = '\0';
    gw_spin_unlock(&s->lock);
}

static bool
q_any_limit(const struct gw_quota_set *s, const struct q_unit *u)
{
    for (int w = 0; w < GW_QUOTA_WINS; w++)
        if (q_limit(s, u, (enum gw_quota_win)w))
            return true;
    return false;
}

/* The unit's own day counters at a known day limit. */
static bool
q_day_spent(const struct gw_quota_set *s, const struct q_unit *u)
{
    uint64_t rpd = q_limit(s, u, GW_QUOTA_RPD), tpd = q_limit(s, u, GW_QUOTA_TPD);

    return (rpd && u->day_req >= rpd) || (tpd && u->day_tok >= tpd);
}

/* The upstream's own headers say a day window has nothing left (Groq's requests,
 * Cerebras' -day headers, OpenRouter's per-day count). */
static bool
q_facts_day_spent(const struct gw_quota_facts *f)
{
    for (size_t k = 0; f && k < f->n && k < GW_QUOTA_MAX_FACTS; k++)
        if ((f->f[k].win == GW_QUOTA_RPD || f->f[k].win == GW_QUOTA_TPD) && f->f[k].remaining == 0)
            return true;
    return false;
}

/* A step of the day ladder: steps count within a rolling day of the first hit. */
static uint64_t
q_day_step(struct q_unit *u, uint64_t now_ms, bool escalate)
{
    unsigned step;

    if (!u->day_first_ms || now_ms >= u->day_first_ms + GW_QUOTA_DAY_MS) {
        u->day_first_ms = now_ms;
        u->day_step = 0;
    }
    step = u->day_step < Q_LEN(q_day_ladder_ms) ? u->day_step : Q_LEN(q_day_ladder_ms) - 1;
    if (escalate)
        u->day_step = step + 1;
    return q_day_ladder_ms[step];
}

void
gw_quota_fail(struct gw_quota_set *s, size_t i, uint64_t now_ms, const struct gw_quota_hit *h,
              struct gw_quota_cooldown *out)
{
    struct q_unit *u;
    enum gw_quota_source src;
    uint64_t dur, ra;
    bool capped, authoritative = false;

    if (i >= s->n)
        return;
    u = &s->u[i];
    gw_spin_lock(&s->lock);
    q_unit_advance(u, now_ms);
    if (h->facts)
        q_learn_locked(u, now_ms, h->facts);
    ra = h->facts ? h->facts->retry_after_ms : 0;
    capped = s->conf.local && s->conf.local_cap_ms;
    if (h->status == 402 || h->status == 403) {
        src = h->status == 402 ? GW_QUOTA_SRC_CREDIT : GW_QUOTA_SRC_TIER;
        dur = q_day_step(u, now_ms, !capped);
    } else if ((h->facts && h->facts->day_exhausted) || q_facts_day_spent(h->facts) ||
               q_day_spent(s, u)) {
        src = GW_QUOTA_SRC_DAY;
        dur = q_day_step(u, now_ms, !capped);
    } else if (q_any_limit(s, u)) {
        src = GW_QUOTA_SRC_TRANSIENT;
        dur = GW_QUOTA_TRANSIENT_MS;
    } else {
        unsigned step;

        src = GW_QUOTA_SRC_UNKNOWN;
        if (!u->last_429_ms || now_ms >= u->last_429_ms + 3600000)
            u->unknown_step = 0;
        step = u->unknown_step < Q_LEN(q_unknown_ladder_ms) ? u->unknown_step
                                                            : Q_LEN(q_unknown_ladder_ms) - 1;
        dur = q_unknown_ladder_ms[step];
        if (!capped)
            u->unknown_step = step + 1;
    }
    if (h->status == 429)
        u->last_429_ms = now_ms;
    if (ra > dur) {
        dur = ra > GW_QUOTA_DAY_MS ? GW_QUOTA_DAY_MS : ra;
        authoritative = true;
    }
    if (capped && dur > s->conf.local_cap_ms)
        dur = s->conf.local_cap_ms;
    else
        capped = false;
    u->cool.hits++;
    __atomic_store_n(&u->quiet, false, __ATOMIC_RELEASE);
    /* Never shorten a cooldown in force. */
    if (!q_unit_cooling(u, now_ms) || now_ms + dur > u->cool.until_ms) {
        u->cool.source = src;
        u->cool.since_ms = now_ms;
        u->cool.until_ms = now_ms + dur;
        u->cool.authoritative = authoritative;
        u->cool.capped = capped;
    }
    if (out)
        *out = u->cool;
    gw_spin_unlock(&s->lock);
}

/* ---- probes ---- */

void
gw_quota_prober_init_scaled(struct gw_quota_prober *p, uint64_t start_ms, uint64_t seed,
                            unsigned div)
{
    if (!div)
        div = 1;
    p->every_ms = GW_QUOTA_PROBE_EVERY_MS / div;
    p->min_left_ms = GW_QUOTA_PROBE_MIN_LEFT_MS / div;
    if (!p->every_ms)
        p->every_ms = 1;
    /* splitmix64 finaliser: a seed that differs by one bit lands anywhere in the interval. */
    seed += 0x9e3779b97f4a7c15ull;
    seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
    seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
    seed ^= seed >> 31;
    p->next_pass_ms = start_ms + seed % p->every_ms;
}

void
gw_quota_prober_init(struct gw_quota_prober *p, uint64_t start_ms, uint64_t seed)
{
    gw_quota_prober_init_scaled(p, start_ms, seed, 1);
}

bool
gw_quota_prober_due(struct gw_quota_prober *p, uint64_t now_ms)
{
    if (now_ms < p->next_pass_ms)
        return false;
    p->next_pass_ms = now_ms + p->every_ms;
    return true;
}

static bool
q_probe_eligible(const struct q_unit *u, uint64_t now_ms, uint64_t min_left_ms)
{
    const struct gw_quota_cooldown *c = &u->cool;

    return q_unit_cooling(u, now_ms) && !c->authoritative &&
           now_ms >= c->since_ms + (c->until_ms - c->since_ms) / 2 &&
           c->until_ms - now_ms >= min_left_ms && now_ms >= u->probe_next_ms;
}

static size_t q_probe_pick(struct gw_quota_set *const *sets, size_t n_sets, uint64_t now_ms,
                           uint64_t min_left_ms, struct gw_quota_probe *out, size_t max);

size_t
gw_quota_probe_pick(struct gw_quota_set *const *sets, size_t n_sets, uint64_t now_ms,
                    struct gw_quota_probe *out, size_t max)
{
    return q_probe_pick(sets, n_sets, now_ms, GW_QUOTA_PROBE_MIN_LEFT_MS, out, max);
}

size_t
gw_quota_probe_pick_by(const struct gw_quota_prober *p, struct gw_quota_set *const *sets,
                       size_t n_sets, uint64_t now_ms, struct gw_quota_probe *out, size_t max)
{
    return q_probe_pick(sets, n_sets, now_ms, p->min_left_ms, out, max);
}

static size_t
q_probe_pick(struct gw_quota_set *const *sets, size_t n_sets, uint64_t now_ms, uint64_t min_left_ms,
             struct gw_quota_probe *out, size_t max)
{
    uint64_t since[GW_QUOTA_PROBES_PER_PASS];
    size_t n = 0;

    if (max > GW_QUOTA_PROBES_PER_PASS)
        max = GW_QUOTA_PROBES_PER_PASS;
    for (size_t k = 0; k < n_sets; k++) {
        struct gw_quota_set *s = sets[k];

        gw_spin_lock(&s->lock);
        for (size_t i = 0; i < s->n; i++) {
            uint64_t t = s->u[i].cool.since_ms;
            size_t at;

            if (!q_probe_eligible(&s->u[i], now_ms, min_left_ms))
                continue;
            /* Keep the <max> cooling longest (earliest since), sorted. */
            for (at = n; at > 0 && since[at - 1] > t; at--)
                ;
            if (at >= max)
                continue;
            if (n < max)
                n++;
            for (size_t j = n - 1; j > at; j--) {
                since[j] = since[j - 1];
                out[j] = out[j - 1];
            }
            since[at] = t;
            out[at].set = s;
            out[at].unit = i;
        }
        gw_spin_unlock(&s->lock);
    }
    return n;
}

void
gw_quota_probe_done(struct gw_quota_set *s, size_t i, uint64_t now_ms, bool pass)
{
    struct q_unit *u;

    if (i >= s->n)
        return;
    u = &s->u[i];
    gw_spin_lock(&s->lock);
    if (pass) {
        memset(&u->cool, 0, sizeof(u->cool));
        u->seen = true;
        u->day_step = 0;
        u->unknown_step = 0;
        u->last_429_ms = 0;
        u->probe_fails = 0;
        u->probe_next_ms = 0;
    } else {
        unsigned k = u->probe_fails < Q_LEN(q_probe_backoff_ms) ? u->probe_fails
                                                                : Q_LEN(q_probe_backoff_ms) - 1;

        u->probe_next_ms = now_ms + q_probe_backoff_ms[k];
        u->probe_fails++;
        __atomic_store_n(&u->quiet, false, __ATOMIC_RELEASE);
    }
    gw_spin_unlock(&s->lock);
}

/* ---- rebuild and views ---- */

void
gw_quota_rebuild_add(struct gw_quota_set *s, size_t i, uint64_t ts_ms, uint64_t tokens,
                     uint64_t now_ms)
{
    struct q_unit *u;

    if (i >= s->n || ts_ms > now_ms)
        return;
    u = &s->u[i];
    gw_spin_lock(&s->lock);
    q_unit_advance(u, now_ms);
    q_count(u, ts_ms / 1000, ts_ms / GW_QUOTA_DAY_MS, 1, tokens);
    u->seen = true;
    gw_spin_unlock(&s->lock);
}

void
gw_quota_view(struct gw_quota_set *s, size_t i, uint64_t now_ms, struct gw_quota_unit_view *out)
{
    struct q_unit *u;

    memset(out, 0, sizeof(*out));
    if (i >= s->n)
        return;
    u = &s->u[i];
    gw_spin_lock(&s->lock);
    q_unit_advance(u, now_ms);
    memcpy(out->fp, u->fp, sizeof(out->fp));
    for (int w = 0; w < GW_QUOTA_WINS; w++) {
        struct gw_quota_win_view *v = &out->win[w];

        v->used = q_used(u, (enum gw_quota_win)w);
        v->limit = q_limit(s, u, (enum gw_quota_win)w);
        v->held_until_ms = u->held_until[w] > now_ms ? u->held_until[w] : 0;
        if (w >= GW_QUOTA_RPD) {
            v->resets_at_ms = (u->day + 1) * GW_QUOTA_DAY_MS;
        } else {
            v->resets_at_ms = now_ms;
            for (uint64_t sec = u->min.last + 1 - Q_MIN_SECS; sec <= u->min.last; sec++) {
                size_t b = sec % Q_MIN_SECS;

                if (u->min.sec[b] == sec && (u->min.req[b] || u->min.tok[b])) {
                    v->resets_at_ms = (sec + Q_MIN_SECS) * 1000;
                    break;
                }
            }
        }
        out->learned[w] = u->learned[w];
    }
    out->cool = u->cool;
    if (!q_unit_cooling(u, now_ms))
        out->cool.source = GW_QUOTA_SRC_NONE;
    out->open_leases = u->open_leases;
    out->leases_dropped = u->leases_dropped;
    out->seen = u->seen;
    gw_spin_unlock(&s->lock);
}

/* ---- registry ---- */

static size_t
q_hash(const char *provider, const char *model)
{
    uint32_t h = 2166136261u; /* FNV-1a over "provider\0model" */

    for (const unsigned char *p = (const unsigned char *)provider; *p; p++)
        h = (h ^ *p) * 16777619u;
    h = (h ^ 0) * 16777619u;
    for (const unsigned char *p = (const unsigned char *)model; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h & (Q_REG_BUCKETS - 1);
}

struct gw_quota_reg *
gw_quota_reg_new(void)
{
    return gw_calloc(1, sizeof(struct gw_quota_reg));
}

void
gw_quota_reg_free(struct gw_quota_reg *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < Q_REG_BUCKETS; i++) {
        struct gw_quota_set *s = reg->heads[i], *next;

        for (; s; s = next) {
            next = s->next;
            gw_quota_set_free(s);
        }
    }
    gw_free(reg);
}

static struct gw_quota_set *
q_chain_find(struct gw_quota_set *const *head, const char *provider, const char *model)
{
    /* ACQUIRE: pairs with the RELEASE store in gw_quota_reg_get, so the set it points at
     * (and every older one down the chain) is fully initialised. */
    struct gw_quota_set *s = __atomic_load_n(head, __ATOMIC_ACQUIRE);

    for (; s; s = s->next)
        if (strcmp(s->provider, provider) == 0 && strcmp(s->model, model) == 0)
            return s;
    return NULL;
}

struct gw_quota_set *
gw_quota_reg_find(const struct gw_quota_reg *reg, const char *provider, const char *model)
{
    if (!provider || !model)
        return NULL;
    return q_chain_find(&reg->heads[q_hash(provider, model)], provider, model);
}

struct gw_quota_set *
gw_quota_reg_get(struct gw_quota_reg *reg, const char *provider, const char *model,
                 const char (*fps)[GW_QUOTA_FP_LEN + 1], size_t n,
                 const struct gw_quota_set_conf *c, bool *created)
{
    struct gw_quota_set *s, *found;
    size_t h;

    if (created)
        *created = false;
    if (!provider || !model || strlen(provider) > Q_NAME_MAX || strlen(model) > Q_NAME_MAX)
        return NULL;
    h = q_hash(provider, model);
    found = q_chain_find(&reg->heads[h], provider, model);
    if (found)
        return found;
    s = gw_quota_set_new(fps, n, c);
    if (!s)
        return NULL;
    strcpy(s->provider, provider);
    strcpy(s->model, model);
    gw_spin_lock(&reg->lock);
    found = q_chain_find(&reg->heads[h], provider, model);
    if (!found && reg->n_sets >= GW_QUOTA_MAX_SETS) {
        gw_spin_unlock(&reg->lock);
        gw_quota_set_free(s); /* full: the caller falls back to (provider, "") */
        return NULL;
    }
    if (!found) {
        reg->n_sets++;
        s->next = reg->heads[h];
        /* RELEASE: the set's initialisation happens before a reader's ACQUIRE load. */
        __atomic_store_n(&reg->heads[h], s, __ATOMIC_RELEASE);
    }
    gw_spin_unlock(&reg->lock);
    if (found) {
        gw_quota_set_free(s); /* another thread created it first */
        return found;
    }
    if (created)
        *created = true;
    return s;
}

bool
gw_quota_reg_rebuild_add(struct gw_quota_reg *reg, uint64_t ts_ms, const char *provider,
                         const char *model, const char *fp, uint64_t tokens, uint64_t now_ms)
{
    struct gw_quota_set *s = gw_quota_reg_find(reg, provider, model);
    int i;

    if (!s)
        s = gw_quota_reg_find(reg, provider, "");
    if (!s || (i = gw_quota_set_find(s, fp)) < 0)
        return false;
    gw_quota_rebuild_add(s, (size_t)i, ts_ms, tokens, now_ms);
    return true;
}

void
gw_quota_reg_each(const struct gw_quota_reg *reg,
                  void (*fn)(void *arg, const char *provider, const char *model,
                             struct gw_quota_set *s),
                  void *arg)
{
    for (size_t i = 0; i < Q_REG_BUCKETS; i++) {
        /* ACQUIRE: as in q_chain_find. */
        struct gw_quota_set *s = __atomic_load_n(&reg->heads[i], __ATOMIC_ACQUIRE);

        for (; s; s = s->next)
            fn(arg, s->provider, s->model, s);
    }
}

static uint64_t
q_secs_until(uint64_t at_ms, uint64_t now_ms)
{
    return at_ms > now_ms ? (at_ms - now_ms + 999) / 1000 : 0;
}

const char *
gw_quota_verdict_str(const struct gw_quota_verdict *v, uint64_t now_ms, char *buf, size_t len)
{
    if (!len)
        return buf;
    switch (v->skip) {
    case GW_QUOTA_CHOSEN:
        snprintf(buf, len, "chosen (headroom %u%%)", (unsigned)(v->headroom_ppm / 10000));
        break;
    case GW_QUOTA_SKIP_HEADROOM:
        snprintf(buf, len, "less headroom (%u%%)", (unsigned)(v->headroom_ppm / 10000));
        break;
    case GW_QUOTA_SKIP_COOLING:
        snprintf(buf, len, "cooling: %s until +%llu s, %u hit%s%s%s",
                 gw_quota_source_str(v->cool.source),
                 (unsigned long long)q_secs_until(v->cool.until_ms, now_ms), (unsigned)v->cool.hits,
                 v->cool.hits == 1 ? "" : "s", v->cool.authoritative ? ", authoritative" : "",
                 v->cool.capped ? ", capped (local)" : "");
        break;
    default:
        snprintf(buf, len, "%s window full, admits in %llu s", gw_quota_win_str(v->win),
                 (unsigned long long)q_secs_until(v->frees_at_ms, now_ms));
    }
    return buf;
}

const char *
gw_quota_win_str(enum gw_quota_win w)
{
    static const char *const n[] = {"rpm", "tpm", "rpd", "tpd"};

    return (unsigned)w < GW_QUOTA_WINS ? n[w] : "unknown";
}

const char *
gw_quota_source_str(enum gw_quota_source s)
{
    static const char *const n[] = {"none", "transient", "day", "unknown", "credit", "tier"};

    return (unsigned)s < Q_LEN(n) ? n[s] : "unknown";
}
