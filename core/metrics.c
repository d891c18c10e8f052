/* SPDX-License-Identifier: MIT
 * core/metrics.c - see core/metrics.h. One block per table: three name dimensions, each
 * an array of names with an open-addressing index (owner only), two open-addressing
 * series tables keyed by packed name ids, and per-upstream arrays for attempts and the
 * two histograms. Name id 0 of every dimension is "_other", the overflow.
 * Owns:    the table's block.
 * Threads: see core/metrics.h.
 * See:     core/metrics.h, tests/unit/core/test_metrics.c
 */
#include "core/metrics.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/codes.h"
#include "core/row.h"

const uint32_t gw_metrics_bounds_ms[GW_METRICS_BUCKETS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000,
};

enum { DIM_CLIENT, DIM_MODEL, DIM_UPSTREAM, DIM__COUNT };

#define NAME_INDEX (2 * GW_METRICS_MAX_NAMES) /* open addressing, at most half full */
#define REQ_SLOTS 4096
#define REQ_LIMIT 3072 /* the rest is kept for the "_other" series, at most 6 * codes */
#define USE_SLOTS 1024
#define USE_LIMIT 1000
#define N_CLASSES 6 /* "none" (no status), 1xx .. 5xx */
#define N_KINDS 4   /* tokens: input, output, cache_read, cache_write */

_Static_assert(GW_METRICS_MAX_NAMES <= 256, "name ids are packed in 8 bits");
_Static_assert(GW_CODE__COUNT < 4096, "codes are packed in 12 bits");
_Static_assert(N_CLASSES *GW_CODE__COUNT < REQ_SLOTS - REQ_LIMIT, "room for the overflow");

struct mx_names {
    uint32_t n;                 /* published names: release store by the owner */
    uint16_t index[NAME_INDEX]; /* id + 1 by hash, 0 = empty; owner only */
    char name[GW_METRICS_MAX_NAMES][GW_METRICS_NAME_LEN + 1];
};

struct mx_req {
    uint64_t key; /* 0 = empty; release store by the owner once */
    uint64_t n;
};

struct mx_use {
    uint64_t key;
    uint64_t v[N_KINDS + 1]; /* tokens by kind, then cost in micro-dollars */
};

struct gw_metrics {
    struct mx_names names[DIM__COUNT];
    unsigned n_req, n_use; /* series in use; owner only */
    struct mx_req req[REQ_SLOTS];
    struct mx_use use[USE_SLOTS];
    /* by upstream id */
    uint64_t attempts[GW_METRICS_MAX_NAMES][GW_OUT__COUNT];
    uint64_t dur[GW_METRICS_MAX_NAMES][GW_METRICS_BUCKETS + 1];
    uint64_t dur_sum_ms[GW_METRICS_MAX_NAMES];
    uint64_t ttfc[GW_METRICS_MAX_NAMES][GW_METRICS_BUCKETS + 1];
    uint64_t ttfc_sum_ms[GW_METRICS_MAX_NAMES];
};

static const char *const class_names[N_CLASSES] = {"none", "1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const kind_names[N_KINDS] = {"input", "output", "cache_read", "cache_write"};

/* ---- counters: one writer, readers on other threads ---- */

/* The owner's increment: a plain load and store (relaxed atomics, so a concurrent
 * scrape reads a whole value), never a locked read-modify-write. */
static inline void
bump(uint64_t *p, uint64_t n)
{
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

static inline uint64_t
peek(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* ---- names ---- */

static uint32_t
hash_name(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    size_t i;

    for (i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The id of <s> (cut at GW_METRICS_NAME_LEN) in dimension <d>, added when new; 0
 * ("_other") once the dimension is full. Owner only. */
static unsigned
name_id(struct mx_names *d, struct gw_str s)
{
    uint32_t i;

    if (s.len > GW_METRICS_NAME_LEN)
        s.len = GW_METRICS_NAME_LEN;
    for (i = hash_name(s.ptr, s.len) % NAME_INDEX;; i = (i + 1) % NAME_INDEX) {
        unsigned id = d->index[i];

        if (id == 0)
            break;
        id--;
        if (strncmp(d->name[id], s.ptr, s.len) == 0 && d->name[id][s.len] == '\0')
            return id;
    }
    if (d->n >= GW_METRICS_MAX_NAMES)
        return 0;
    memcpy(d->name[d->n], s.ptr, s.len);
    d->name[d->n][s.len] = '\0';
    d->index[i] = (uint16_t)(d->n + 1);
    /* Release: the name's bytes are visible to whoever reads the new count. */
    __atomic_store_n(&d->n, d->n + 1, __ATOMIC_RELEASE);
    return d->n - 1;
}

static unsigned
name_id_c(struct mx_names *d, const char *s)
{
    return name_id(d, gw_str_c(s));
}

/* ---- series tables ---- */

static inline uint32_t
hash_key(uint64_t key, unsigned slots)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) % slots;
}

static inline uint64_t
req_key(unsigned client, unsigned model, unsigned up, unsigned cls, unsigned code)
{
    return 1ull << 63 | (uint64_t)client << 32 | (uint64_t)model << 24 | (uint64_t)up << 16 |
           (uint64_t)cls << 12 | code;
}

/* The slot of series <key>, taken when new. When the table is past REQ_LIMIT, a new
 * series is counted as the "_other" one with the same class and code. */
static struct mx_req *
req_slot(struct gw_metrics *m, uint64_t key)
{
    for (;;) {
        uint32_t i = hash_key(key, REQ_SLOTS);

        for (;; i = (i + 1) % REQ_SLOTS) {
            uint64_t k = m->req[i].key;

            if (k == key)
                return &m->req[i];
            if (k == 0)
                break;
        }
        bool other = (key & 0xffffff0000ull) == 0; /* client, model, upstream all _other */

        if (m->n_req < REQ_LIMIT || other) {
            m->n_req++;
            __atomic_store_n(&m->req[i].key, key, __ATOMIC_RELEASE);
            return &m->req[i];
        }
        key = req_key(0, 0, 0, (unsigned)(key >> 12) & 0xf, (unsigned)key & 0xfff);
    }
}

static struct mx_use *
use_slot(struct gw_metrics *m, unsigned client, unsigned model)
{
    uint64_t key = 1ull << 63 | (uint64_t)client << 8 | model;

    for (;;) {
        uint32_t i = hash_key(key, USE_SLOTS);

        for (;; i = (i + 1) % USE_SLOTS) {
            uint64_t k = m->use[i].key;

            if (k == key)
                return &m->use[i];
            if (k == 0)
                break;
        }
        if (m->n_use < USE_LIMIT || key == 1ull << 63) {
            m->n_use++;
            __atomic_store_n(&m->use[i].key, key, __ATOMIC_RELEASE);
            return &m->use[i];
        }
        key = 1ull << 63;
    }
}

/* ---- table ---- */

struct gw_metrics *
gw_metrics_new(void)
{
    struct gw_metrics *m = gw_calloc(1, sizeof(*m));
    unsigned d;

    if (!m)
        return NULL;
    for (d = 0; d < DIM__COUNT; d++)
        name_id_c(&m->names[d], GW_METRICS_OTHER); /* id 0 */
    return m;
}

void
gw_metrics_free(struct gw_metrics *m)
{
    gw_free(m);
}

unsigned
gw_metrics_bucket(const uint32_t *bounds, unsigned n, uint64_t v)
{
    unsigned i;

    for (i = 0; i < n; i++)
        if (v <= bounds[i])
            break;
    return i;
}

static unsigned
status_class(unsigned status)
{
    return status >= 100 && status < 600 ? status / 100 : 0;
}

void
gw_metrics_count_row(struct gw_metrics *m, const struct gw_row *r)
{
    unsigned client = name_id_c(&m->names[DIM_CLIENT], r->client);
    /* Before authentication the model is whatever the sender wrote: not shown. */
    unsigned model = name_id_c(&m->names[DIM_MODEL], r->client[0] ? r->model : "");
    unsigned up = name_id_c(&m->names[DIM_UPSTREAM], r->upstream);
    unsigned code = r->code < GW_CODE__COUNT ? r->code : GW_E_INTERNAL;
    struct mx_use *u;
    unsigned i, prev_up = up;
    const char *prev_name = r->upstream;

    bump(&req_slot(m, req_key(client, model, up, status_class(r->status), code))->n, 1);
    bump(&m->dur[up][gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS, r->duration_ms)],
         1);
    bump(&m->dur_sum_ms[up], r->duration_ms);
    if (r->ttfb_ms >= 0) {
        bump(&m->ttfc[up][gw_metrics_bucket(gw_metrics_bounds_ms, GW_METRICS_BUCKETS,
                                            (uint64_t)r->ttfb_ms)],
             1);
        bump(&m->ttfc_sum_ms[up], (uint64_t)r->ttfb_ms);
    }
    for (i = 0; i < r->n_attempts && i < GW_ROW_MAX_ATTEMPTS; i++) {
        const struct gw_attempt *a = &r->attempts[i];
        unsigned id;

        /* Most hops are the answering upstream's or the previous hop's: no hashing. */
        if (strcmp(a->upstream, r->upstream) == 0) {
            id = up;
        } else if (strcmp(a->upstream, prev_name) == 0) {
            id = prev_up;
        } else {
            id = prev_up = name_id_c(&m->names[DIM_UPSTREAM], a->upstream);
            prev_name = a->upstream;
        }
        bump(&m->attempts[id][a->outcome < GW_OUT__COUNT ? a->outcome : GW_OUT_FAILED], 1);
    }
    if (r->usage.input_tokens | r->usage.output_tokens | r->usage.cache_read_tokens |
            r->usage.cache_write_tokens ||
        r->cost_micros > 0) {
        u = use_slot(m, client, model);
        bump(&u->v[0], r->usage.input_tokens);
        bump(&u->v[1], r->usage.output_tokens);
        bump(&u->v[2], r->usage.cache_read_tokens);
        bump(&u->v[3], r->usage.cache_write_tokens);
        bump(&u->v[4], r->cost_micros > 0 ? (uint64_t)r->cost_micros : 0);
    }
}

void
gw_metrics_count_refusal(struct gw_metrics *m, unsigned status, enum gw_code code)
{
    unsigned client = name_id_c(&m->names[DIM_CLIENT], "");
    unsigned model = name_id_c(&m->names[DIM_MODEL], "");
    unsigned up = name_id_c(&m->names[DIM_UPSTREAM], "");

    if ((unsigned)code >= GW_CODE__COUNT)
        code = GW_E_INTERNAL;
    bump(&req_slot(m, req_key(client, model, up, status_class(status), code))->n, 1);
}

/* ---- summing ---- */

void
gw_metrics_add(struct gw_metrics *dst, const struct gw_metrics *src)
{
    uint16_t map[DIM__COUNT][GW_METRICS_MAX_NAMES];
    uint32_t n[DIM__COUNT];
    unsigned d, i, j;

    for (d = 0; d < DIM__COUNT; d++) {
        /* Acquire: every name below n is written. */
        n[d] = __atomic_load_n(&src->names[d].n, __ATOMIC_ACQUIRE);
        for (i = 0; i < n[d]; i++)
            map[d][i] = (uint16_t)name_id_c(&dst->names[d], src->names[d].name[i]);
    }
    for (i = 0; i < REQ_SLOTS; i++) {
        uint64_t key = __atomic_load_n(&src->req[i].key, __ATOMIC_ACQUIRE);
        unsigned c = (unsigned)(key >> 32) & 0xff, mo = (unsigned)(key >> 24) & 0xff,
                 u = (unsigned)(key >> 16) & 0xff;

        /* A series whose names appeared after we read the counts: next scrape. */
        if (key == 0 || c >= n[DIM_CLIENT] || mo >= n[DIM_MODEL] || u >= n[DIM_UPSTREAM])
            continue;
        bump(&req_slot(dst, req_key(map[DIM_CLIENT][c], map[DIM_MODEL][mo], map[DIM_UPSTREAM][u],
                                    (unsigned)(key >> 12) & 0xf, (unsigned)key & 0xfff))
                  ->n,
             peek(&src->req[i].n));
    }
    for (i = 0; i < USE_SLOTS; i++) {
        uint64_t key = __atomic_load_n(&src->use[i].key, __ATOMIC_ACQUIRE);
        unsigned c = (unsigned)(key >> 8) & 0xff, mo = (unsigned)key & 0xff;
        struct mx_use *u;

        if (key == 0 || c >= n[DIM_CLIENT] || mo >= n[DIM_MODEL])
            continue;
        u = use_slot(dst, map[DIM_CLIENT][c], map[DIM_MODEL][mo]);
        for (j = 0; j <= N_KINDS; j++)
            bump(&u->v[j], peek(&src->use[i].v[j]));
    }
    for (i = 0; i < n[DIM_UPSTREAM]; i++) {
        unsigned u = map[DIM_UPSTREAM][i];

        for (j = 0; j < GW_OUT__COUNT; j++)
            bump(&dst->attempts[u][j], peek(&src->attempts[i][j]));
        for (j = 0; j <= GW_METRICS_BUCKETS; j++) {
            bump(&dst->dur[u][j], peek(&src->dur[i][j]));
            bump(&dst->ttfc[u][j], peek(&src->ttfc[i][j]));
        }
        bump(&dst->dur_sum_ms[u], peek(&src->dur_sum_ms[i]));
        bump(&dst->ttfc_sum_ms[u], peek(&src->ttfc_sum_ms[i]));
    }
}

/* ---- rendering ---- */

enum gw_code
gw_metrics_append_label(struct gw_buf *b, struct gw_str v)
{
    size_t i;

    for (i = 0; i < v.len; i++) {
        unsigned char ch = (unsigned char)v.ptr[i];
        const char *esc = ch == '\\' ? "\\\\" : ch == '"' ? "\\\"" : ch == '\n' ? "\\n" : NULL;
        char one = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';

        if (esc ? gw_buf_append(b, esc, 2) != GW_OK : gw_buf_append(b, &one, 1) != GW_OK)
            return GW_E_NOMEM;
    }
    return GW_OK;
}

/* <v> / <scale> (a power of ten) in decimal without trailing zeros ("0.005", "2.5",
 * "120"). <out> holds at least 48 bytes. */
static void
format_scaled(uint64_t v, uint64_t scale, char *out)
{
    uint64_t frac = v % scale;
    size_t n = gw_fmt_u64(out, v / scale);

    if (frac) {
        out[n++] = '.';
        for (scale /= 10; scale && frac; scale /= 10) {
            out[n++] = (char)('0' + frac / scale);
            frac %= scale;
        }
    }
    out[n] = '\0';
}

enum gw_code
gw_metrics_append_histogram(struct gw_buf *b, const char *name, const char *labels,
                            const uint32_t *bounds, unsigned n_bounds, const uint64_t *counts,
                            uint64_t sum, uint64_t sum_scale)
{
    uint64_t cum = 0;
    char le[48], s[48];
    unsigned i;
    bool fail = false;

    for (i = 0; i <= n_bounds; i++) {
        cum += counts[i];
        if (i < n_bounds)
            format_scaled(bounds[i], sum_scale, le);
        else
            snprintf(le, sizeof(le), "+Inf");
        fail |= gw_buf_printf(b, "%s_bucket{%sle=\"%s\"} %llu\n", name, labels, le,
                              (unsigned long long)cum) != GW_OK;
    }
    format_scaled(sum, sum_scale, s);
    /* _sum and _count of a labelled histogram carry the labels without their last ','. */
    size_t ll = strlen(labels);

    if (ll)
        fail |=
            gw_buf_printf(b, "%s_sum{%.*s} %s\n%s_count{%.*s} %llu\n", name, (int)(ll - 1), labels,
                          s, name, (int)(ll - 1), labels, (unsigned long long)cum) != GW_OK;
    else
        fail |= gw_buf_printf(b, "%s_sum %s\n%s_count %llu\n", name, s, name,
                              (unsigned long long)cum) != GW_OK;
    return fail ? GW_E_NOMEM : GW_OK;
}

/* Appends `key="value"` for each of the <n> <keys> and <vals>, ','-separated, with a
 * ',' after the last one too when <trailing>. */
static bool
labels_of(struct gw_buf *b, const char *const *keys, const char *const *vals, unsigned n,
          bool trailing)
{
    bool fail = false;
    unsigned i;

    for (i = 0; i < n; i++) {
        fail |= gw_buf_printf(b, "%s=\"", keys[i]) != GW_OK;
        fail |= gw_metrics_append_label(b, gw_str_c(vals[i])) != GW_OK;
        fail |= gw_buf_append(b, trailing || i + 1 < n ? "\"," : "\"",
                              trailing || i + 1 < n ? 2 : 1) != GW_OK;
    }
    return !fail;
}

static bool
render_requests(const struct gw_metrics *m, struct gw_buf *b)
{
    static const char *const keys[] = {"client", "model", "upstream", "status_class", "code"};
    bool fail = false;
    unsigned i;

    fail |= gw_buf_printf(b, "# HELP gw_requests_total Requests finished, by client, model asked, "
                             "answering upstream (\"\" when none), HTTP status class and gw "
                             "code.\n# TYPE gw_requests_total counter\n") != GW_OK;
    for (i = 0; i < REQ_SLOTS && !fail; i++) {
        uint64_t key = m->req[i].key;
        const char *vals[5];

        if (!key)
            continue;
        vals[0] = m->names[DIM_CLIENT].name[(key >> 32) & 0xff];
        vals[1] = m->names[DIM_MODEL].name[(key >> 24) & 0xff];
        vals[2] = m->names[DIM_UPSTREAM].name[(key >> 16) & 0xff];
        vals[3] = class_names[((key >> 12) & 0xf) % N_CLASSES];
        vals[4] = gw_code_str((enum gw_code)(key & 0xfff));
        fail |= gw_buf_append_cstr(b, "gw_requests_total{") != GW_OK;
        fail |= !labels_of(b, keys, vals, 5, false);
        fail |= gw_buf_printf(b, "} %llu\n", (unsigned long long)m->req[i].n) != GW_OK;
    }
    return !fail;
}

static bool
render_usage(const struct gw_metrics *m, struct gw_buf *b)
{
    static const char *const keys[] = {"client", "model", "kind"};
    struct gw_buf lines[2] = {{0}, {0}};
    bool fail = false;
    unsigned i, k;

    for (i = 0; i < USE_SLOTS && !fail; i++) {
        uint64_t key = m->use[i].key;
        const char *vals[3];

        if (!key)
            continue;
        vals[0] = m->names[DIM_CLIENT].name[(key >> 8) & 0xff];
        vals[1] = m->names[DIM_MODEL].name[key & 0xff];
        for (k = 0; k < N_KINDS; k++) {
            vals[2] = kind_names[k];
            fail |= gw_buf_append_cstr(&lines[0], "gw_tokens_total{") != GW_OK;
            fail |= !labels_of(&lines[0], keys, vals, 3, false);
            fail |=
                gw_buf_printf(&lines[0], "} %llu\n", (unsigned long long)m->use[i].v[k]) != GW_OK;
        }
        fail |= gw_buf_append_cstr(&lines[1], "gw_cost_usd_total{") != GW_OK;
        fail |= !labels_of(&lines[1], keys, vals, 2, false);
        fail |= gw_buf_printf(&lines[1], "} %llu.%06llu\n",
                              (unsigned long long)(m->use[i].v[N_KINDS] / 1000000),
                              (unsigned long long)(m->use[i].v[N_KINDS] % 1000000)) != GW_OK;
    }
    fail |= gw_buf_printf(b, "# HELP gw_tokens_total Tokens of finished requests by client, model "
                             "asked and kind (input is uncached input).\n"
                             "# TYPE gw_tokens_total counter\n") != GW_OK;
    if (lines[0].len)
        fail |= gw_buf_append(b, lines[0].data, lines[0].len) != GW_OK;
    fail |= gw_buf_printf(b, "# HELP gw_cost_usd_total Cost of finished requests in USD at "
                             "the answering upstream's prices, by client and model asked.\n"
                             "# TYPE gw_cost_usd_total counter\n") != GW_OK;
    if (lines[1].len)
        fail |= gw_buf_append(b, lines[1].data, lines[1].len) != GW_OK;
    gw_buf_fini(&lines[0]);
    gw_buf_fini(&lines[1]);
    return !fail;
}

static bool
render_attempts(const struct gw_metrics *m, struct gw_buf *b)
{
    static const char *const keys[] = {"upstream", "outcome"};
    bool fail = false;
    unsigned u, o;

    fail |= gw_buf_printf(b, "# HELP gw_attempts_total Attempts (hops) of requests by upstream "
                             "and outcome.\n# TYPE gw_attempts_total counter\n") != GW_OK;
    for (u = 0; u < m->names[DIM_UPSTREAM].n && !fail; u++)
        for (o = 0; o < GW_OUT__COUNT; o++) {
            const char *vals[2] = {m->names[DIM_UPSTREAM].name[u],
                                   gw_outcome_str((enum gw_outcome)o)};

            if (!m->attempts[u][o])
                continue;
            fail |= gw_buf_append_cstr(b, "gw_attempts_total{") != GW_OK;
            fail |= !labels_of(b, keys, vals, 2, false);
            fail |= gw_buf_printf(b, "} %llu\n", (unsigned long long)m->attempts[u][o]) != GW_OK;
        }
    return !fail;
}

static bool
render_hist(const struct gw_metrics *m, struct gw_buf *b, const char *name, const char *help,
            const uint64_t (*h)[GW_METRICS_BUCKETS + 1], const uint64_t *sum)
{
    static const char *const keys[] = {"upstream"};
    struct gw_buf lb = {0};
    bool fail = false;
    unsigned u, j;

    fail |= gw_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name) != GW_OK;
    for (u = 0; u < m->names[DIM_UPSTREAM].n && !fail; u++) {
        const char *vals[1] = {m->names[DIM_UPSTREAM].name[u]};
        uint64_t total = 0;

        for (j = 0; j <= GW_METRICS_BUCKETS; j++)
            total += h[u][j];
        if (!total)
            continue;
        lb.len = 0;
        fail |= !labels_of(&lb, keys, vals, 1, true); /* a gw_buf is NUL-terminated */
        fail |=
            !fail && gw_metrics_append_histogram(b, name, lb.data, gw_metrics_bounds_ms,
                                                 GW_METRICS_BUCKETS, h[u], sum[u], 1000) != GW_OK;
    }
    gw_buf_fini(&lb);
    return !fail;
}

enum gw_code
gw_metrics_render(const struct gw_metrics *m, struct gw_buf *b)
{
    bool ok = render_requests(m, b) && render_attempts(m, b) &&
              render_hist(m, b, "gw_request_duration_seconds",
                          "Time from a request's start to its end, by answering upstream.", m->dur,
                          m->dur_sum_ms) &&
              render_hist(m, b, "gw_time_to_first_content_seconds",
                          "Time from a request's start to its first content, by answering "
                          "upstream.",
                          m->ttfc, m->ttfc_sum_ms) &&
              render_usage(m, b);

    return ok ? GW_OK : GW_E_NOMEM;
}
