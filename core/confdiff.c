/* SPDX-License-Identifier: MIT
 * core/confdiff.c - what a reload changes: canonical byte forms of each config entry
 * and section, compared by name between the old and the new config.
 * Owns:    the name copies of a struct gw_confdiff.
 * Threads: any; pure.
 * See:     core/confdiff.h, tests/unit/core/test_confdiff.c
 */
#include "core/confdiff.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/str.h"

/* Tripwires: a field added to one of these structs must be written by its canonical form
 * below (or said there to be left out, like runtime pointers), else a reload changing
 * only that field would answer "no change". When one fires, update the form and the
 * size. x86-64 sizes; other targets skip the check. */
#if defined(__x86_64__) && defined(__LP64__)
_Static_assert(sizeof(struct gw_conf_provider) == 456,
               "struct gw_conf_provider changed: update provider_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf_model_spec) == 56,
               "struct gw_conf_model_spec changed: update provider_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf_group) == 64,
               "struct gw_conf_group changed: update group_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf_member) == 32,
               "struct gw_conf_member changed: update group_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf_client) == 112,
               "struct gw_conf_client changed: update client_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf_limit) == 40,
               "struct gw_conf_limit changed: update client_canon in core/confdiff.c");
_Static_assert(sizeof(struct gw_conf) == 312,
               "struct gw_conf changed: update the section forms in core/confdiff.c");
#endif

/* ---- canonical forms ----
 * Every value is written with a type letter and strings with their length, so two
 * different entries cannot write the same bytes. */

struct canon {
    struct gw_buf b;
    bool nomem;
};

static void
c_u64(struct canon *c, uint64_t v)
{
    if (gw_buf_printf(&c->b, "u%llu;", (unsigned long long)v) != GW_OK)
        c->nomem = true;
}

static void
c_dbl(struct canon *c, double v)
{
    /* %a: exact, so 0.1 and the nearest other double differ */
    if (gw_buf_printf(&c->b, "d%a;", v) != GW_OK)
        c->nomem = true;
}

static void
c_bytes(struct canon *c, const void *p, size_t n)
{
    if (gw_buf_printf(&c->b, "s%zu:", n) != GW_OK || gw_buf_append(&c->b, p, n) != GW_OK)
        c->nomem = true;
}

static void
c_str(struct canon *c, const char *s)
{
    if (!s) {
        if (gw_buf_append(&c->b, "n", 1) != GW_OK)
            c->nomem = true;
        return;
    }
    c_bytes(c, s, strlen(s));
}

static void
c_strv(struct canon *c, char *const *v, size_t n)
{
    size_t i;

    c_u64(c, n);
    for (i = 0; i < n; i++)
        c_str(c, v[i]);
}

static void
c_addr(struct canon *c, const struct gw_conf_addr *a)
{
    c_str(c, a->host);
    c_u64(c, a->port);
}

static void
c_quota(struct canon *c, const struct gw_conf_quota_win *w)
{
    c_u64(c, w->rpm);
    c_u64(c, w->tpm);
    c_u64(c, w->rpd);
    c_u64(c, w->tpd);
}

/* Left out: index (position), state, slots, quota_reg and quota_name (runtime, set by
 * net; quota_name derives from the keys, which are written). base_url's parts
 * (tls, host, port, path_prefix) follow from it but are written anyway. */
static void
provider_canon(struct canon *c, const struct gw_conf_provider *p)
{
    size_t i;

    c_str(c, p->name);
    c_u64(c, p->dialect);
    c_str(c, p->base_url);
    c_u64(c, p->tls);
    c_str(c, p->host);
    c_u64(c, p->port);
    c_str(c, p->path_prefix);
    c_u64(c, p->n_keys);
    for (i = 0; i < p->n_keys; i++) {
        c_str(c, p->keys[i].env);
        c_str(c, p->keys[i].secret); /* a rotated credential is a change (never shown) */
    }
    c_str(c, p->aws_region);
    c_str(c, p->aws_key_id.env);
    c_str(c, p->aws_key_id.secret);
    c_str(c, p->aws_secret.env);
    c_str(c, p->aws_secret.secret);
    c_str(c, p->aws_token.env);
    c_str(c, p->aws_token.secret);
    c_strv(c, p->models, p->n_models);
    c_u64(c, p->any_model);
    c_u64(c, p->enabled);
    c_u64(c, p->max_concurrent);
    c_u64(c, p->min_speed_tps);
    c_u64(c, p->min_speed_window_secs);
    c_u64(c, p->n_model_specs);
    for (i = 0; i < p->n_model_specs; i++) {
        const struct gw_conf_model_spec *s = &p->model_specs[i];

        c_str(c, s->model);
        c_u64(c, s->context_window);
        c_u64(c, s->max_output_tokens);
        c_dbl(c, s->input);
        c_dbl(c, s->output);
        c_dbl(c, s->cache_read);
        c_dbl(c, s->cache_write);
    }
    c_u64(c, p->billing);
    c_u64(c, p->http2);
    c_u64(c, p->has_quota);
    c_quota(c, &p->quota_default);
    c_u64(c, p->n_quota_models);
    for (i = 0; i < p->n_quota_models; i++) {
        c_str(c, p->quota_models[i].model);
        c_quota(c, &p->quota_models[i].win);
    }
    c_u64(c, p->quota_pool);
    c_u64(c, p->quota_local_cap_secs);
    c_u64(c, p->quota_probes);
    c_str(c, p->proxy_host); /* the proxy in effect, from the file or the environment */
    c_u64(c, p->proxy_port);
    c_str(c, p->proxy_auth); /* a new proxy credential is a change (never shown) */
    c_str(c, p->proxy_from);
    c_str(c, p->ca_file);
    /* net keeps one context per (ca_file path, content): the same pointer when the file
     * is unchanged, another when its certificates changed (net/egress.c) */
    c_u64(c, (uint64_t)(uintptr_t)p->tls_ctx);
}

/* Left out: index, wrr (runtime), and how the file spells an entry (plain, weight_set,
 * balance_by_set): `- a` and `- {name: a}` mean the same member. */
static void
group_canon(struct canon *c, const struct gw_conf_group *g)
{
    size_t i;

    c_str(c, g->name);
    c_u64(c, g->type);
    c_str(c, g->model);
    c_u64(c, g->n_members);
    for (i = 0; i < g->n_members; i++) {
        c_str(c, g->members[i].provider);
        c_u64(c, g->members[i].weight);
        c_str(c, g->members[i].model);
    }
    c_u64(c, g->balance_by);
}

/* Left out: index, slots and usage (runtime). */
static void
client_canon(struct canon *c, const struct gw_conf_client *cl)
{
    size_t i;

    c_str(c, cl->name);
    c_bytes(c, cl->key_digest, sizeof(cl->key_digest)); /* a new key is a change */
    c_str(c, cl->key_env);
    c_strv(c, cl->models, cl->n_models);
    c_u64(c, cl->max_concurrent);
    c_u64(c, cl->n_limits);
    for (i = 0; i < cl->n_limits; i++) {
        const struct gw_conf_limit *l = &cl->limits[i];

        c_u64(c, l->per);
        c_u64(c, l->has_requests);
        c_u64(c, l->has_tokens);
        c_u64(c, l->has_cost);
        c_u64(c, l->requests);
        c_u64(c, l->tokens);
        c_u64(c, l->cost_micros);
        c_u64(c, l->cache_reads);
    }
}

static void
server_canon(struct canon *c, const struct gw_conf *f)
{
    size_t i;

    c_u64(c, f->server.n_listen);
    for (i = 0; i < f->server.n_listen; i++)
        c_addr(c, &f->server.listen[i]);
    c_u64(c, f->server.workers);
    c_u64(c, f->server.max_body_mb);
    c_u64(c, f->server.max_header_kb);
    c_u64(c, f->server.max_headers);
    c_u64(c, f->server.header_timeout_secs);
    c_u64(c, f->server.idle_timeout_secs);
    c_u64(c, f->server.body_timeout_secs);
    c_u64(c, f->server.max_buffered_body_mb);
    c_u64(c, f->server.max_connections);
    c_u64(c, f->server.drain_secs);
    c_str(c, f->server.tls_cert);
    c_str(c, f->server.tls_key);
    c_u64(c, f->server.n_tls_listen);
    for (i = 0; i < f->server.n_tls_listen; i++)
        c_addr(c, &f->server.tls_listen[i]);
    c_u64(c, f->server.tls_on_listen);
    /* Contexts are made once per content of the files (net/tls.c): a renewed
     * certificate at the same path is a new context, so a change. */
    c_u64(c, (uint64_t)(uintptr_t)f->server.tls_ctx);
}

static void
control_canon(struct canon *c, const struct gw_conf *f)
{
    c_addr(c, &f->control.listen);
    c_str(c, f->control.token_env);
    c_str(c, f->control.token); /* a new token is a change (never shown) */
}

static void
store_canon(struct canon *c, const struct gw_conf *f)
{
    c_str(c, f->store.path);
    c_u64(c, f->store.map_size_mb);
    c_u64(c, f->store.responses);
}

static void
retention_canon(struct canon *c, const struct gw_conf *f)
{
    c_u64(c, f->retention.row_days);
}

static void
failover_canon(struct canon *c, const struct gw_conf *f)
{
    c_u64(c, f->failover.failures_to_pause);
    c_u64(c, f->failover.pause_secs);
    c_u64(c, f->failover.max_pause_secs);
    c_u64(c, f->failover.stream_start_wait_secs);
    c_u64(c, f->failover.next_on_slow_start);
    c_u64(c, f->failover.slot_wait_secs);
    c_u64(c, f->failover.connect_timeout_ms);
    c_u64(c, f->failover.first_byte_timeout_secs);
    c_u64(c, f->failover.read_idle_timeout_secs);
}

static void
prices_canon(struct canon *c, const struct gw_conf *f)
{
    size_t i, n = f->prices ? f->prices->n : 0;

    c_str(c, f->prices_path);
    c_u64(c, f->prices_explicit);
    c_u64(c, n);
    for (i = 0; i < n; i++) {
        const struct gw_price *p = &f->prices->v[i];

        c_str(c, p->model);
        c_dbl(c, p->input);
        c_dbl(c, p->output);
        c_dbl(c, p->cache_read);
        c_dbl(c, p->cache_write);
        c_u64(c, p->context_window);
        c_u64(c, p->max_output_tokens);
    }
}

/* ---- the comparison ---- */

/* How one kind of entry is listed and written: a view of a config's array. */
struct kind {
    const void *(*at)(const struct gw_conf *f, size_t i);
    size_t (*count)(const struct gw_conf *f);
    const char *(*name)(const void *e);
    void (*canon)(struct canon *c, const void *e);
};

static const void *
prov_at(const struct gw_conf *f, size_t i)
{
    return &f->providers[i];
}
static size_t
prov_count(const struct gw_conf *f)
{
    return f ? f->n_providers : 0;
}
static const char *
prov_name(const void *e)
{
    return ((const struct gw_conf_provider *)e)->name;
}
static void
prov_canon(struct canon *c, const void *e)
{
    provider_canon(c, e);
}

static const void *
grp_at(const struct gw_conf *f, size_t i)
{
    return &f->groups[i];
}
static size_t
grp_count(const struct gw_conf *f)
{
    return f ? f->n_groups : 0;
}
static const char *
grp_name(const void *e)
{
    return ((const struct gw_conf_group *)e)->name;
}
static void
grp_canon(struct canon *c, const void *e)
{
    group_canon(c, e);
}

static const void *
cli_at(const struct gw_conf *f, size_t i)
{
    return &f->clients[i];
}
static size_t
cli_count(const struct gw_conf *f)
{
    return f ? f->n_clients : 0;
}
static const char *
cli_name(const void *e)
{
    return ((const struct gw_conf_client *)e)->name;
}
static void
cli_canon(struct canon *c, const void *e)
{
    client_canon(c, e);
}

static const struct kind kind_providers = {prov_at, prov_count, prov_name, prov_canon};
static const struct kind kind_groups = {grp_at, grp_count, grp_name, grp_canon};
static const struct kind kind_clients = {cli_at, cli_count, cli_name, cli_canon};

static bool
names_add(struct gw_confdiff_names *l, const char *name)
{
    char **v = gw_realloc(l->v, (l->n + 1) * sizeof(*v));
    char *s;

    if (!v)
        return false;
    l->v = v;
    s = gw_strdup(name ? name : "");
    if (!s)
        return false;
    l->v[l->n++] = s;
    return true;
}

static void
names_fini(struct gw_confdiff_names *l)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        gw_free(l->v[i]);
    gw_free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* The entry of <f> named <name>, or NULL. */
static const void *
find(const struct kind *k, const struct gw_conf *f, const char *name)
{
    size_t i, n = k->count(f);

    for (i = 0; i < n; i++) {
        const void *e = k->at(f, i);

        if (strcmp(k->name(e), name) == 0)
            return e;
    }
    return NULL;
}

/* Whether <a> and <b> write different canonical forms; -1 when out of memory. */
static int
differ(const struct kind *k, const void *a, const void *b)
{
    struct canon ca = {0}, cb = {0};
    int rc;

    k->canon(&ca, a);
    k->canon(&cb, b);
    if (ca.nomem || cb.nomem)
        rc = -1;
    else
        rc = ca.b.len != cb.b.len || memcmp(ca.b.data, cb.b.data, ca.b.len) != 0;
    gw_buf_fini(&ca.b);
    gw_buf_fini(&cb.b);
    return rc;
}

static bool
diff_kind(const struct kind *k, const struct gw_conf *old, const struct gw_conf *neu,
          struct gw_confdiff_set *out)
{
    size_t i;

    for (i = 0; i < k->count(neu); i++) {
        const void *e = k->at(neu, i), *was = old ? find(k, old, k->name(e)) : NULL;
        int d;

        if (!was) {
            if (!names_add(&out->added, k->name(e)))
                return false;
            continue;
        }
        d = differ(k, was, e);
        if (d < 0 || (d && !names_add(&out->changed, k->name(e))))
            return false;
    }
    for (i = 0; i < k->count(old); i++) {
        const void *e = k->at(old, i);

        if (!find(k, neu, k->name(e)) && !names_add(&out->removed, k->name(e)))
            return false;
    }
    return true;
}

static void
log_canon(struct canon *c, const struct gw_conf *f)
{
    c_u64(c, (uint64_t)f->log.format);
    c_u64(c, (uint64_t)f->log.level);
}

static const struct {
    const char *name;
    void (*canon)(struct canon *c, const struct gw_conf *f);
} sections[] = {
    {"server", server_canon},     {"control", control_canon},
    {"store", store_canon},       {"retention", retention_canon},
    {"failover", failover_canon}, {"prices", prices_canon},
    {"log", log_canon},
};

static bool
diff_sections(const struct gw_conf *old, const struct gw_conf *neu, struct gw_confdiff *out)
{
    size_t i;

    for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        struct canon a = {0}, b = {0};
        bool nomem, same;

        if (old)
            sections[i].canon(&a, old);
        sections[i].canon(&b, neu);
        nomem = a.nomem || b.nomem;
        same = old && a.b.len == b.b.len && memcmp(a.b.data, b.b.data, a.b.len) == 0;
        gw_buf_fini(&a.b);
        gw_buf_fini(&b.b);
        if (nomem)
            return false;
        if (!same)
            out->settings[out->n_settings++] = sections[i].name;
    }
    return true;
}

enum gw_code
gw_confdiff_build(const struct gw_conf *old, const struct gw_conf *neu, struct gw_confdiff *out)
{
    memset(out, 0, sizeof(*out));
    if (!diff_kind(&kind_providers, old, neu, &out->providers) ||
        !diff_kind(&kind_groups, old, neu, &out->groups) ||
        !diff_kind(&kind_clients, old, neu, &out->clients) || !diff_sections(old, neu, out)) {
        gw_confdiff_fini(out);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

static void
set_fini(struct gw_confdiff_set *s)
{
    names_fini(&s->added);
    names_fini(&s->removed);
    names_fini(&s->changed);
}

void
gw_confdiff_fini(struct gw_confdiff *d)
{
    set_fini(&d->providers);
    set_fini(&d->groups);
    set_fini(&d->clients);
    d->n_settings = 0;
}

static bool
set_is_empty(const struct gw_confdiff_set *s)
{
    return s->added.n == 0 && s->removed.n == 0 && s->changed.n == 0;
}

bool
gw_confdiff_is_empty(const struct gw_confdiff *d)
{
    return set_is_empty(&d->providers) && set_is_empty(&d->groups) && set_is_empty(&d->clients) &&
           d->n_settings == 0;
}

static void
format_set(struct gw_buf *b, const char *what, const struct gw_confdiff_set *s)
{
    const struct gw_confdiff_names *lists[3] = {&s->added, &s->removed, &s->changed};
    static const char marks[3] = {'+', '-', '~'};
    size_t i, j;

    if (set_is_empty(s))
        return;
    gw_buf_printf(b, "%s%s", b->len ? "; " : "", what);
    for (i = 0; i < 3; i++)
        for (j = 0; j < lists[i]->n; j++)
            gw_buf_printf(b, " %c%s", marks[i], lists[i]->v[j]);
}

void
gw_confdiff_format(const struct gw_confdiff *d, char *buf, size_t size)
{
    struct gw_buf b = {0};
    size_t i;

    if (size == 0)
        return;
    format_set(&b, "providers", &d->providers);
    format_set(&b, "groups", &d->groups);
    format_set(&b, "clients", &d->clients);
    if (d->n_settings)
        gw_buf_printf(&b, "%ssettings", b.len ? "; " : "");
    for (i = 0; i < d->n_settings; i++)
        gw_buf_printf(&b, " %s", d->settings[i]);
    if (!b.data || b.len == 0) {
        snprintf(buf, size, "no change");
    } else if (b.len < size) {
        memcpy(buf, b.data, b.len + 1);
    } else {
        memcpy(buf, b.data, size - 1);
        buf[size - 1] = '\0';
        if (size > 4)
            memcpy(buf + size - 4, "...", 3);
    }
    gw_buf_fini(&b);
}
