/* SPDX-License-Identifier: MIT
 * core/conf_prices.c - the price table (etc/prices.yaml) and the one resolve function
 * of DESIGN.md 9: what a (provider, model) costs and how much context and output it
 * takes. providers[].model_specs wins over the table field by field; billing: free
 * makes every price 0. The listings, the context-window check, the max_tokens filled
 * in for Anthropic, the cheapest order and cost accounting all read through
 * gw_conf_model_spec / gw_conf_price_input, so they cannot disagree.
 * Model ids match exactly, else without a trailing version suffix ("-2025-04-14",
 * "-20250514", "-latest"): one table row covers a model's dated snapshots.
 * Pure: the caller reads the file and passes the bytes (net/main.c at startup and on
 * reload), then attaches the table to the new config before publishing it.
 * Owns:    a struct gw_prices owns its rows; a config owns the table attached to it.
 * Threads: parse on any thread; lookups on any thread over an immutable snapshot.
 * See:     core/conf.h, core/conf_schema.c, etc/prices.yaml, docs/config.md,
 *          tests/unit/core/test_prices.c
 */
#include "core/conf.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/conf-priv.h"

#define PRICE_MAX 1000000.0  /* USD per 1M tokens: anything above is a typo */
#define TOKENS_MAX 100000000 /* context window / max output, as model_specs */
#define PATH_LEN 64          /* "models[12345].max_output_tokens" */

/* ---- model ids ---- */

static bool
all_digits(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* The length of <model> without its trailing version suffix, or strlen(model) when it
 * has none. Suffixes: "-latest", "-YYYY-MM-DD" (OpenAI snapshots), "-YYYYMMDD"
 * (Anthropic), the year starting with "20" so that other numbers stay part of the id. */
static size_t
model_base_len(const char *model, size_t n)
{
    if (n > 7 && memcmp(model + n - 7, "-latest", 7) == 0)
        return n - 7;
    if (n > 11 && model[n - 11] == '-' && memcmp(model + n - 10, "20", 2) == 0 &&
        all_digits(model + n - 10, 4) && model[n - 6] == '-' && all_digits(model + n - 5, 2) &&
        model[n - 3] == '-' && all_digits(model + n - 2, 2))
        return n - 11;
    if (n > 9 && model[n - 9] == '-' && memcmp(model + n - 8, "20", 2) == 0 &&
        all_digits(model + n - 8, 8))
        return n - 9;
    return n;
}

/* strcmp of the slice <s, n> against the string <t>. */
static int
slice_cmp(const char *s, size_t n, const char *t)
{
    size_t tn = strlen(t);
    int r = memcmp(s, t, n < tn ? n : tn);

    if (r)
        return r;
    return n < tn ? -1 : n > tn ? 1 : 0;
}

static const struct gw_price *
table_find(const struct gw_prices *t, const char *model, size_t n)
{
    size_t lo = 0, hi = t->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = slice_cmp(model, n, t->v[mid].model);

        if (r == 0)
            return &t->v[mid];
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const struct gw_price *
gw_prices_find(const struct gw_prices *t, const char *model)
{
    const struct gw_price *r;
    size_t n, base;

    if (!t || !model || t->n == 0)
        return NULL;
    n = strlen(model);
    r = table_find(t, model, n);
    if (r)
        return r;
    base = model_base_len(model, n);
    return base < n ? table_find(t, model, base) : NULL;
}

/* ---- parse ---- */

static int
cmp_price(const void *a, const void *b)
{
    return strcmp(((const struct gw_price *)a)->model, ((const struct gw_price *)b)->model);
}

/* One price field: absent leaves <*out> at -1 (not given). False when out of memory. */
static bool
check_price(struct gw_conf_problems *probs, const char *base, const char *field, const double *v,
            double *out)
{
    char path[PATH_LEN + 32], num[48];

    *out = -1;
    if (!v)
        return true;
    if (!isfinite(*v) || *v < 0 || *v > PRICE_MAX) {
        snprintf(path, sizeof(path), "%s.%s", base, field);
        snprintf(num, sizeof(num), "%g", *v);
        return gw_conf_problem_add(probs, GW_E_CFG_RANGE, path, num,
                                   "must be 0..1000000 (USD per 1M tokens)") == GW_OK;
    }
    *out = *v;
    return true;
}

/* One token count: absent leaves <*out> at 0 (not given). False when out of memory. */
static bool
check_tokens(struct gw_conf_problems *probs, const char *base, const char *field, const int64_t *v,
             uint64_t *out)
{
    char path[PATH_LEN + 32], num[32];

    *out = 0;
    if (!v)
        return true;
    if (*v < 1 || *v > TOKENS_MAX) {
        snprintf(path, sizeof(path), "%s.%s", base, field);
        snprintf(num, sizeof(num), "%" PRId64, *v);
        return gw_conf_problem_add(probs, GW_E_CFG_RANGE, path, num,
                                   "must be 1..100000000 tokens (leave it out when unknown)") ==
               GW_OK;
    }
    *out = (uint64_t)*v;
    return true;
}

/* Checks models[i] into <r>. False when out of memory; problems go to <probs>. */
static bool
check_entry(const struct gw_prices_file *f, unsigned i, struct gw_price *r,
            struct gw_conf_problems *probs)
{
    const struct gw_prices_file_entry *e = &f->models[i];
    char base[PATH_LEN], path[PATH_LEN + 8];
    unsigned k;

    snprintf(base, sizeof(base), "models[%u]", i);
    snprintf(path, sizeof(path), "%s.model", base);
    if (!e->model) {
        if (gw_conf_problem_add(probs, GW_E_CFG_MISSING_FIELD, path, "(missing)",
                                "the model id is required") != GW_OK)
            return false;
    } else if (strspn(e->model, " \t") == strlen(e->model)) {
        if (gw_conf_problem_add(probs, GW_E_CFG_BAD_VALUE, path, e->model,
                                "a model id must not be blank") != GW_OK)
            return false;
    } else {
        for (k = 0; k < i; k++)
            if (f->models[k].model && strcmp(f->models[k].model, e->model) == 0)
                break;
        if (k < i && gw_conf_problem_add(probs, GW_E_CFG_PRICE_DUPLICATE_MODEL, path, e->model,
                                         "already listed as models[%u]", k) != GW_OK)
            return false;
    }
    return check_price(probs, base, "input", e->input, &r->input) &&
           check_price(probs, base, "output", e->output, &r->output) &&
           check_price(probs, base, "cache_read", e->cache_read, &r->cache_read) &&
           check_price(probs, base, "cache_write", e->cache_write, &r->cache_write) &&
           check_tokens(probs, base, "context_window", e->context_window, &r->context_window) &&
           check_tokens(probs, base, "max_output_tokens", e->max_output_tokens,
                        &r->max_output_tokens);
}

enum gw_code
gw_prices_parse(const char *yaml, size_t len, struct gw_prices **out,
                struct gw_conf_problems *probs)
{
    struct gw_prices_file *f = NULL;
    struct gw_prices *t;
    size_t before = probs->n;
    enum gw_code rc;
    unsigned i;

    *out = NULL;
    rc = gw_conf_cyaml_load(yaml, len, &gw_prices_file_schema, (void **)&f, probs);
    if (rc != GW_OK)
        return rc;
    t = gw_calloc(1, sizeof(*t));
    if (!t)
        goto nomem;
    if (f && f->models_count) {
        t->v = gw_calloc(f->models_count, sizeof(*t->v));
        if (!t->v)
            goto nomem;
    }
    for (i = 0; f && i < f->models_count; i++) {
        struct gw_price *r = &t->v[t->n];

        memset(r, 0, sizeof(*r));
        if (!check_entry(f, i, r, probs))
            goto nomem;
        if (probs->n > before)
            continue; /* refused anyway: keep checking, stop copying */
        r->model = gw_strdup(f->models[i].model);
        if (!r->model)
            goto nomem;
        t->n++;
    }
    gw_conf_cyaml_free(&gw_prices_file_schema, f);
    if (probs->n > before) {
        gw_prices_free(t);
        return probs->v[before].code;
    }
    if (t->n > 1)
        qsort(t->v, t->n, sizeof(*t->v), cmp_price);
    *out = t;
    return GW_OK;

nomem:
    gw_conf_cyaml_free(&gw_prices_file_schema, f);
    gw_prices_free(t);
    gw_conf_problems_fini(probs);
    return GW_E_NOMEM;
}

void
gw_prices_free(struct gw_prices *t)
{
    size_t i;

    if (!t)
        return;
    for (i = 0; t->v && i < t->n; i++)
        gw_free(t->v[i].model);
    gw_free(t->v);
    gw_free(t);
}

enum gw_code
gw_conf_set_prices(struct gw_conf *c, struct gw_prices **pp)
{
    gw_prices_free(c->prices);
    c->prices = *pp;
    *pp = NULL;
    return GW_OK;
}

/* ---- resolve ---- */

/* <p>'s model_specs entry for <model>: exact, else by the id without its suffix. */
static const struct gw_conf_model_spec *
spec_find(const struct gw_conf_provider *p, const char *model)
{
    size_t i, n, base;

    if (!p || !model || p->n_model_specs == 0)
        return NULL;
    for (i = 0; i < p->n_model_specs; i++)
        if (p->model_specs[i].model && strcmp(p->model_specs[i].model, model) == 0)
            return &p->model_specs[i];
    n = strlen(model);
    base = model_base_len(model, n);
    if (base == n)
        return NULL;
    for (i = 0; i < p->n_model_specs; i++)
        if (p->model_specs[i].model && slice_cmp(model, base, p->model_specs[i].model) == 0)
            return &p->model_specs[i];
    return NULL;
}

/* The spec's value when written (>= 0), else the table's, else unknown. */
static void
take_price(double spec, double table, double *v, bool *known)
{
    if (spec >= 0) {
        *v = spec;
        *known = true;
    } else if (table >= 0) {
        *v = table;
        *known = true;
    }
}

static void
take_tokens(uint64_t spec, uint64_t table, uint64_t *v, bool *known)
{
    if (spec) {
        *v = spec;
        *known = true;
    } else if (table) {
        *v = table;
        *known = true;
    }
}

void
gw_conf_model_spec(const struct gw_conf *c, const struct gw_conf_provider *p, const char *model,
                   struct gw_model_spec *out)
{
    static const struct gw_conf_model_spec no_spec = {NULL, 0, 0, -1, -1, -1, -1};
    static const struct gw_price no_row = {NULL, -1, -1, -1, -1, 0, 0};
    const struct gw_conf_model_spec *s = spec_find(p, model);
    const struct gw_price *r = c ? gw_prices_find(c->prices, model) : NULL;

    memset(out, 0, sizeof(*out));
    if (!s)
        s = &no_spec;
    if (!r)
        r = &no_row;
    take_price(s->input, r->input, &out->input, &out->input_known);
    take_price(s->output, r->output, &out->output, &out->output_known);
    take_price(s->cache_read, r->cache_read, &out->cache_read, &out->cache_read_known);
    take_price(s->cache_write, r->cache_write, &out->cache_write, &out->cache_write_known);
    take_tokens(s->context_window, r->context_window, &out->context_window,
                &out->context_window_known);
    take_tokens(s->max_output_tokens, r->max_output_tokens, &out->max_output_tokens,
                &out->max_output_tokens_known);
    if (p && p->billing == GW_BILLING_FREE) {
        out->input = out->output = out->cache_read = out->cache_write = 0;
        out->input_known = out->output_known = true;
        out->cache_read_known = out->cache_write_known = true;
    }
}

double
gw_conf_price_input(const struct gw_conf *c, const struct gw_conf_provider *p, const char *model)
{
    struct gw_model_spec s;

    gw_conf_model_spec(c, p, model, &s);
    return s.input_known ? s.input : -1;
}
