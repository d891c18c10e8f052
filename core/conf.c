/* SPDX-License-Identifier: MIT
 * core/conf.c - the configuration loader: YAML bytes -> struct gw_conf.
 * Four steps. (0) A walk of libyaml's tree of the bytes against the same schema table
 * reports every unknown key, key written twice and value of the wrong type (libcyaml stops
 * at the first), removes them and writes the rest back out as YAML for the next steps.
 * (1) libcyaml loads the bytes into the file model (core/conf-priv.h, schema in
 * core/conf_schema.c); an error the walk did not see (syntax, an alias) is turned into
 * one problem, with the field path rebuilt from the backtrace libcyaml logs. (2) The few keys
 * libcyaml cannot describe (mappings keyed by model id, group members that are a plain name or a
 * mapping) are read from libyaml's document tree of the same bytes. (3) The public struct is built
 * from the file model over gw_conf_defaults(), checking every key and recording every problem, each
 * with a code, a path, the value as written and a message. A path names each list entry it goes
 * through that has a name: "groups[0] (g).name". Pure: no I/O; the environment and SHA-256 come
 * from the caller (struct gw_conf_env). Secrets ({value} keys, resolved variables, the control
 * token) never reach a problem, and are wiped when the config is freed. Owns:    the config it
 * returns (until gw_conf_free) and the problems it fills. Threads: any; no shared state. See:
 * core/conf.h, core/conf-priv.h, core/conf_schema.c, docs/config.md, tests/unit/core/test_conf.c
 */
#include "core/conf.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cyaml/cyaml.h>
#include <yaml.h>

#include "core/alloc.h"
#include "core/conf-priv.h"
#include "core/log.h"
#include "core/proxy.h"
#include "core/str.h"

#define PATH_LEN 256    /* longest path we build ("providers[12].quota.models.x.rpm") */
#define VALUE_SHOWN 120 /* longest value echoed in a problem */
#define LOG_MAX 16384   /* cap on libcyaml's captured error text */
#define MAX_FRAMES 32   /* backtrace frames kept */
#define NAME_SHOWN 64   /* longest entry name shown in a path */

/* One parse. nomem is sticky: helpers that fail to allocate set it and the caller
 * carries on (every consumer tolerates NULL), so the error paths stay short. */
struct ctx {
    struct gw_conf *c;
    struct gw_conf_problems *probs;
    const struct gw_conf_env *env;
    const char *yaml;
    size_t len;
    bool nomem;
    bool have_doc;
    yaml_document_t doc;
};

/* ---- small helpers ---- */

static char *
dup_n(struct ctx *x, const char *s, size_t n)
{
    char *d = gw_strndup(s, n);

    if (!d)
        x->nomem = true;
    return d;
}

static char *
dup_s(struct ctx *x, const char *s)
{
    return dup_n(x, s, strlen(s));
}

static void
wipe_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    gw_free(s);
}

static void
cred_free(struct gw_conf_cred *c)
{
    gw_free(c->env);
    wipe_free(c->secret);
}

static bool
is_lower_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
           ch == '-';
}

/* [a-z0-9._-]{1,64}: provider and client names (core/row-t.h GW_NAME_MAX). */
static bool
is_valid_name(const char *s)
{
    size_t n = strlen(s), i;

    if (n < 1 || n > 64)
        return false;
    for (i = 0; i < n; i++)
        if (!is_lower_name_char(s[i]))
            return false;
    return true;
}

/* [A-Za-z_][A-Za-z0-9_]*: an environment variable name. */
static bool
is_valid_env_name(const char *s)
{
    size_t i;

    if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (i = 0; s[i]; i++) {
        char ch = s[i];

        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return false;
    }
    return true;
}

static const char *
env_get(struct ctx *x, const char *name)
{
    if (!x->env || !x->env->getenv)
        return NULL;
    return x->env->getenv(x->env->arg, name);
}

/* "<dir>/<p>" unless <p> is absolute or there is no dir. */
static char *
resolve_path(struct ctx *x, const char *p)
{
    const char *dir = x->c->dir;
    struct gw_buf b = {0};

    if (p[0] == '/' || !dir || !dir[0])
        return dup_s(x, p);
    if (gw_buf_printf(&b, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", p) != GW_OK) {
        x->nomem = true;
        return NULL;
    }
    return b.data;
}

/* snprintf that may truncate on purpose (paths and shown values are capped). */
__attribute__((format(printf, 3, 4))) static void
fmt_into(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

/* ---- problems ---- */

/* Appends one problem to <p>: path is "<base>.<field>" (or either alone), <value> as
 * shown (capped). False when out of memory (<p> is then unchanged). */
__attribute__((format(printf, 6, 0))) static bool
problem_v(struct gw_conf_problems *p, enum gw_code code, const char *base, const char *field,
          const char *value, const char *fmt, va_list ap)
{
    struct gw_conf_problem *v;
    struct gw_buf path = {0}, msg = {0};
    char shown[VALUE_SHOWN + 4];

    if (p->n % 8 == 0) {
        v = gw_realloc(p->v, (p->n + 8) * sizeof(*v));
        if (!v)
            return false;
        p->v = v;
    }
    v = &p->v[p->n];
    if (gw_buf_printf(&path, "%s%s%s", base ? base : "", base && base[0] && field ? "." : "",
                      field ? field : "") != GW_OK)
        goto nomem;
    if (gw_buf_vprintf(&msg, fmt, ap) != GW_OK)
        goto nomem;
    if (!value)
        value = "";
    if (strlen(value) > VALUE_SHOWN)
        snprintf(shown, sizeof(shown), "%.*s...", VALUE_SHOWN, value);
    else
        snprintf(shown, sizeof(shown), "%s", value);
    v->value = gw_strdup(shown);
    if (!v->value)
        goto nomem;
    v->code = code;
    v->path = path.data ? path.data : gw_strdup("");
    v->msg = msg.data ? msg.data : gw_strdup("");
    if (!v->path || !v->msg) {
        gw_free(v->value);
        gw_free(v->path);
        gw_free(v->msg);
        return false;
    }
    p->n++;
    return true;
nomem:
    gw_buf_fini(&path);
    gw_buf_fini(&msg);
    return false;
}

/* Records one problem of this parse; out of memory is sticky in x->nomem. */
__attribute__((format(printf, 6, 7))) static void
problem(struct ctx *x, enum gw_code code, const char *base, const char *field, const char *value,
        const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (!problem_v(x->probs, code, base, field, value, fmt, ap))
        x->nomem = true;
    va_end(ap);
}

enum gw_code
gw_conf_problem_add(struct gw_conf_problems *probs, enum gw_code code, const char *path,
                    const char *value, const char *fmt, ...)
{
    va_list ap;
    bool ok;

    va_start(ap, fmt);
    ok = problem_v(probs, code, path, NULL, value, fmt, ap);
    va_end(ap);
    return ok ? GW_OK : GW_E_NOMEM;
}

static void
missing(struct ctx *x, const char *base, const char *field, const char *what)
{
    problem(x, GW_E_CFG_MISSING_FIELD, base, field, "(missing)", "%s is required", what);
}

/* Checks an optional integer: absent leaves <*out> (the default); out of [lo, hi] is a
 * problem with <code>. True when <*out> holds a good value. */
static bool
take_int(struct ctx *x, const char *base, const char *field, const int64_t *v, int64_t lo,
         int64_t hi, enum gw_code code, unsigned *out)
{
    char num[32];

    if (!v)
        return true;
    if (*v < lo || *v > hi) {
        snprintf(num, sizeof(num), "%" PRId64, *v);
        problem(x, code, base, field, num, "must be %" PRId64 "..%" PRId64, lo, hi);
        return false;
    }
    *out = (unsigned)*v;
    return true;
}

static bool
take_u64(struct ctx *x, const char *base, const char *field, const int64_t *v, int64_t lo,
         int64_t hi, uint64_t *out)
{
    char num[32];

    if (!v)
        return true;
    if (*v < lo || *v > hi) {
        snprintf(num, sizeof(num), "%" PRId64, *v);
        if (hi == INT64_MAX)
            problem(x, GW_E_CFG_RANGE, base, field, num, "must be at least %" PRId64, lo);
        else
            problem(x, GW_E_CFG_RANGE, base, field, num, "must be %" PRId64 "..%" PRId64, lo, hi);
        return false;
    }
    *out = (uint64_t)*v;
    return true;
}

static void
take_bool(const int *v, bool *out)
{
    if (v)
        *out = *v != 0;
}

/* Looks <s> up in a NULL-terminated word list; -1 when absent. */
static int
word_index(const char *s, const char *const *words)
{
    int i;

    for (i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return i;
    return -1;
}

static const char *const dialect_words[] = {"openai", "responses", "anthropic",
                                            "gemini", "bedrock",   NULL};
static const char *const billing_words[] = {"metered", "free", NULL};
/* In the order of enum gw_http2. */
static const char *const http2_words[] = {"auto", "on", "off", NULL};
static const char *const pool_words[] = {"model", "account", NULL};
static const char *const group_type_words[] = {"fallback", "load-balance", "url-test", "cheapest",
                                               NULL};
static const char *const balance_words[] = {"weights", "latency", "health", "latency-health", NULL};
static const char *const per_words[] = {"minute", "hour", "day", "week", "month", NULL};
/* In the order of enum gw_log_format and enum gw_log_level (core/log.h). */
static const char *const log_format_words[] = {"text", "json", NULL};
static const char *const log_level_words[] = {"error", "warn", "info", "debug", NULL};

/* A word from <words> (enum value = index) or a config.bad_value problem. */
static bool
take_word(struct ctx *x, const char *base, const char *field, const char *v,
          const char *const *words, const char *choices, int *out)
{
    int i;

    if (!v)
        return true;
    i = word_index(v, words);
    if (i < 0) {
        problem(x, GW_E_CFG_BAD_VALUE, base, field, v, "must be one of %s", choices);
        return false;
    }
    *out = i;
    return true;
}

/* ---- addresses and URLs ---- */

static bool
is_port(const char *s, size_t n, uint16_t *port)
{
    unsigned long v = 0;
    size_t i;

    if (n < 1 || n > 5)
        return false;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > 65535)
        return false; /* 0 is a port here: a listener picks a free one; URLs refuse it */
    *port = (uint16_t)v;
    return true;
}

static bool
is_host_char(char ch, bool v6)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '.' || ch == '-')
        return true;
    return v6 ? (ch == ':' || ch == '%' || ch == '_') : ch == '_';
}

/* "host[:port]" or "[v6][:port]" (<n> bytes). The host is returned without brackets;
 * *has_port tells whether a port was written. False when malformed. */
static bool
split_host_port(const char *s, size_t n, size_t *host_len, const char **host, uint16_t *port,
                bool *has_port)
{
    const char *h, *colon;
    size_t hl, i;
    bool v6 = false;

    *has_port = false;
    if (n == 0)
        return false;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', n);

        if (!close)
            return false;
        h = s + 1;
        hl = (size_t)(close - h);
        v6 = true;
        if ((size_t)(close + 1 - s) < n) {
            if (close[1] != ':')
                return false;
            if (!is_port(close + 2, n - (size_t)(close + 2 - s), port))
                return false;
            *has_port = true;
        }
        if (!memchr(h, ':', hl))
            return false; /* brackets are for IPv6 only */
    } else {
        h = s;
        colon = memchr(s, ':', n);
        if (colon) {
            hl = (size_t)(colon - s);
            if (!is_port(colon + 1, n - hl - 1, port))
                return false;
            *has_port = true;
        } else {
            hl = n;
        }
    }
    if (hl == 0 || hl > 253)
        return false;
    for (i = 0; i < hl; i++)
        if (!is_host_char(h[i], v6))
            return false;
    *host = h;
    *host_len = hl;
    return true;
}

/* A listen address "host:port" / "[v6]:port" into <a>. False when malformed. */
static bool
parse_listen(struct ctx *x, const char *s, struct gw_conf_addr *a)
{
    const char *h;
    size_t hl;
    uint16_t port = 0;
    bool has_port;

    if (!split_host_port(s, strlen(s), &hl, &h, &port, &has_port) || !has_port)
        return false;
    gw_free(a->host);
    a->host = dup_n(x, h, hl);
    a->port = port;
    return true;
}

/* base_url "http(s)://host[:port][/prefix]" into the provider's fields. NULL when
 * fine, else the reason. */
static const char *
parse_base_url(struct ctx *x, const char *url, struct gw_conf_provider *p)
{
    const char *rest, *slash, *h, *end;
    size_t hl, n;
    uint16_t port = 0;
    bool has_port;

    if (strncasecmp(url, "https://", 8) == 0) {
        p->tls = true;
        rest = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        p->tls = false;
        rest = url + 7;
    } else {
        return "the scheme must be http:// or https://";
    }
    for (end = rest; *end; end++)
        if ((unsigned char)*end <= ' ' || *end == 0x7f || *end == '?' || *end == '#' ||
            *end == '\\')
            return "a base URL holds no spaces, query (?) or fragment (#)";
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (memchr(rest, '@', n))
        return "credentials in the URL are not allowed; use keys";
    if (!split_host_port(rest, n, &hl, &h, &port, &has_port) || (has_port && port == 0))
        return "the host (and port 1..65535) is malformed";
    p->host = dup_n(x, h, hl);
    p->port = has_port ? port : (p->tls ? 443 : 80);
    if (slash) {
        n = strlen(slash);
        while (n > 0 && slash[n - 1] == '/')
            n--;
        p->path_prefix = dup_n(x, slash, n);
    } else {
        p->path_prefix = dup_s(x, "");
    }
    return NULL;
}

/* ---- libcyaml glue ---- */

static void *
on_cyaml_mem(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (size == 0) {
        gw_free(ptr);
        return NULL;
    }
    return gw_realloc(ptr, size);
}

/* Keeps libcyaml's error-level text (the error line and its backtrace). Lower levels
 * are never captured: they echo every scalar, secrets included. */
__attribute__((format(printf, 3, 0))) static void
on_cyaml_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    struct gw_buf *b = ctx;
    va_list ap;

    if (level < CYAML_LOG_ERROR || b->len > LOG_MAX)
        return;
    va_copy(ap, args);
    (void)gw_buf_vprintf(b, fmt, ap); /* out of memory here only loses the detail */
    va_end(ap);
}

/* One backtrace frame: "in mapping field 'k'", "in sequence entry 'N'", "in mapping". */
struct frame {
    char kind; /* 'f' field, 'e' entry, 'm' mapping */
    char key[64];
    unsigned idx;
    unsigned line;
};

struct cyaml_error {
    char msg[256];              /* the error line, "Load: " stripped */
    struct frame f[MAX_FRAMES]; /* innermost first */
    unsigned n;
};

static void
parse_cyaml_log(const char *text, struct cyaml_error *e)
{
    const char *line = text, *nl;

    memset(e, 0, sizeof(*e));
    for (; line && *line; line = nl ? nl + 1 : NULL) {
        const char *q;
        size_t n;

        nl = strchr(line, '\n');
        n = nl ? (size_t)(nl - line) : strlen(line);
        if (n >= 6 && strncmp(line, "Load: ", 6) == 0) {
            if (!e->msg[0] && strncmp(line + 6, "Backtrace:", 10) != 0)
                snprintf(e->msg, sizeof(e->msg), "%.*s", (int)(n - 6), line + 6);
            continue;
        }
        while (n > 0 && *line == ' ') {
            line++;
            n--;
        }
        if (e->n == MAX_FRAMES || strncmp(line, "in ", 3) != 0)
            continue;
        {
            struct frame *f = &e->f[e->n];
            const char *ln = strstr(line, "(line: ");

            memset(f, 0, sizeof(*f));
            if (ln && ln < line + n)
                f->line = (unsigned)strtoul(ln + 7, NULL, 10);
            if (strncmp(line, "in mapping field '", 18) == 0) {
                f->kind = 'f';
                q = memchr(line + 18, '\'', n - 18);
                if (!q)
                    continue;
                snprintf(f->key, sizeof(f->key), "%.*s", (int)(q - (line + 18)), line + 18);
            } else if (strncmp(line, "in sequence entry '", 19) == 0) {
                f->kind = 'e';
                f->idx = (unsigned)strtoul(line + 19, NULL, 10);
                f->idx = f->idx ? f->idx - 1 : 0; /* libcyaml counts entries from 1 */
            } else if (strncmp(line, "in mapping", 10) == 0) {
                f->kind = 'm';
            } else {
                continue;
            }
            e->n++;
        }
    }
}

/* The path of a backtrace ("providers[1].keys[0]"), outermost frame first. */
static void
frames_path(const struct cyaml_error *e, char *out, size_t size)
{
    size_t len = 0;
    unsigned i;

    out[0] = '\0';
    for (i = e->n; i-- > 0 && len < size;) {
        const struct frame *f = &e->f[i];
        int w = 0;

        if (f->kind == 'f')
            w = snprintf(out + len, size - len, "%s%s", len ? "." : "", f->key);
        else if (f->kind == 'e')
            w = snprintf(out + len, size - len, "[%u]", f->idx);
        if (w > 0)
            len += (size_t)w;
    }
}

/* Paths whose scalars may be secrets or credentials: never echo them. */
static bool
is_secret_path(const struct cyaml_error *e)
{
    unsigned i;

    for (i = 0; i < e->n; i++)
        if (e->f[i].kind == 'f' &&
            (strcmp(e->f[i].key, "keys") == 0 || strcmp(e->f[i].key, "value") == 0 ||
             strcmp(e->f[i].key, "key_sha256") == 0 || strcmp(e->f[i].key, "base_url") == 0 ||
             strcmp(e->f[i].key, "key_env") == 0 || strcmp(e->f[i].key, "token_env") == 0 ||
             strcmp(e->f[i].key, "proxy") == 0 || strcmp(e->f[i].key, "proxy_auth") == 0))
            return true;
    return false;
}

/* ---- libyaml document tree (keys libcyaml cannot describe) ---- */

/* Loads x->doc once. False on a YAML error, with <mark>/<why> filled when asked. */
static bool
load_doc(struct ctx *x, unsigned *line, unsigned *col, char *why, size_t why_size)
{
    yaml_parser_t p;
    bool ok;

    if (x->have_doc)
        return true;
    if (!yaml_parser_initialize(&p)) {
        x->nomem = true;
        return false;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)x->yaml, x->len);
    ok = yaml_parser_load(&p, &x->doc) != 0;
    if (!ok && line) {
        *line = (unsigned)p.problem_mark.line + 1;
        *col = (unsigned)p.problem_mark.column + 1;
        snprintf(why, why_size, "%s%s%s", p.problem ? p.problem : "YAML error",
                 p.context ? " " : "", p.context ? p.context : "");
        if (p.error == YAML_MEMORY_ERROR)
            x->nomem = true;
    }
    yaml_parser_delete(&p);
    x->have_doc = ok;
    return ok;
}

static yaml_node_t *
node_at(struct ctx *x, yaml_node_item_t id)
{
    return yaml_document_get_node(&x->doc, id);
}

static bool
scalar_is(const yaml_node_t *n, const char *s)
{
    size_t l = strlen(s);

    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l &&
           memcmp(n->data.scalar.value, s, l) == 0;
}

static yaml_node_t *
map_get(struct ctx *x, yaml_node_t *m, const char *key)
{
    yaml_node_pair_t *pr;

    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++)
        if (scalar_is(node_at(x, pr->key), key))
            return node_at(x, pr->value);
    return NULL;
}

static yaml_node_t *
seq_get(struct ctx *x, yaml_node_t *s, size_t i)
{
    if (!s || s->type != YAML_SEQUENCE_NODE ||
        i >= (size_t)(s->data.sequence.items.top - s->data.sequence.items.start))
        return NULL;
    return node_at(x, s->data.sequence.items.start[i]);
}

/* NUL-terminated copy of a scalar (the tree's scalars may hold NULs). */
static char *
scalar_dup(struct ctx *x, const yaml_node_t *n)
{
    return dup_n(x, (const char *)n->data.scalar.value, n->data.scalar.length);
}

static const char *
node_kind(const yaml_node_t *n)
{
    if (!n)
        return "(nothing)";
    if (n->type == YAML_MAPPING_NODE)
        return "(a mapping)";
    if (n->type == YAML_SEQUENCE_NODE)
        return "(a list)";
    return "(a scalar)";
}

/* What the user wrote at a node, for a problem: the scalar text, else its kind. */
static void
node_shown(const yaml_node_t *n, char *out, size_t size)
{
    size_t l;

    if (n && n->type == YAML_SCALAR_NODE) {
        l = n->data.scalar.length < size ? n->data.scalar.length : size - 1;
        memcpy(out, n->data.scalar.value, l);
        out[l] = '\0';
    } else {
        snprintf(out, size, "%s", node_kind(n));
    }
}

/* An integer scalar (decimal, optional sign) into <*v>; false when not one. */
static bool
scalar_int(const yaml_node_t *n, int64_t *v)
{
    char buf[32], *end;
    long long r;

    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0 ||
        n->data.scalar.length >= sizeof(buf))
        return false;
    memcpy(buf, n->data.scalar.value, n->data.scalar.length);
    buf[n->data.scalar.length] = '\0';
    if (!((buf[0] >= '0' && buf[0] <= '9') || buf[0] == '-' || buf[0] == '+'))
        return false;
    errno = 0;
    r = strtoll(buf, &end, 10);
    if (errno || *end)
        return false;
    *v = r;
    return true;
}

static bool
scalar_num(const yaml_node_t *n, double *v)
{
    char buf[64], *end;

    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0 ||
        n->data.scalar.length >= sizeof(buf))
        return false;
    memcpy(buf, n->data.scalar.value, n->data.scalar.length);
    buf[n->data.scalar.length] = '\0';
    if (!((buf[0] >= '0' && buf[0] <= '9') || buf[0] == '-' || buf[0] == '+' || buf[0] == '.'))
        return false;
    *v = strtod(buf, &end);
    return !*end && isfinite(*v);
}

/* The node of the error path in the tree, or NULL. */
static yaml_node_t *
node_of_frames(struct ctx *x, const struct cyaml_error *e)
{
    yaml_node_t *n = yaml_document_get_root_node(&x->doc);
    unsigned i;

    for (i = e->n; n && i-- > 0;) {
        if (e->f[i].kind == 'f')
            n = map_get(x, n, e->f[i].key);
        else if (e->f[i].kind == 'e')
            n = seq_get(x, n, e->f[i].idx);
    }
    return n;
}

/* ---- step 1: the libcyaml error as one problem ---- */

static const char *
expected_text(const char *type)
{
    if (strncmp(type, "INT", 3) == 0)
        return "expected an integer";
    if (strncmp(type, "FLOAT", 5) == 0)
        return "expected a number";
    if (strncmp(type, "ENUM", 4) == 0)
        return "expected true or false";
    if (strncmp(type, "STRING", 6) == 0)
        return "expected a string";
    if (strncmp(type, "MAPPING", 7) == 0)
        return "expected a mapping";
    if (strncmp(type, "SEQUENCE", 8) == 0)
        return "expected a list";
    return "wrong type";
}

static void
report_cyaml_error(struct ctx *x, cyaml_err_t err, const char *log)
{
    struct cyaml_error e;
    char path[PATH_LEN], value[VALUE_SHOWN + 1], where[48] = "";
    const char *m;
    bool secret;

    parse_cyaml_log(log, &e);
    frames_path(&e, path, sizeof(path));
    secret = is_secret_path(&e);
    if (e.n && e.f[0].line)
        snprintf(where, sizeof(where), " (line %u)", e.f[0].line);
    m = e.msg;
    switch (err) {
    case CYAML_ERR_INVALID_KEY: {
        const char *k = strstr(m, "key: ");

        k = k ? k + 5 : "?";
        if (secret) {
            /* Inside a credential even the key's name may be a secret ({sk-...}). */
            problem(x, GW_E_CFG_UNKNOWN_FIELD, path, NULL, "(hidden)",
                    "unknown key in a credential (name hidden); write {env: NAME} or "
                    "{value: SECRET}%s",
                    where);
            return;
        }
        /* The value of an unknown key is not echoed: it may be a misplaced secret. */
        problem(x, GW_E_CFG_UNKNOWN_FIELD, path, k, k, "unknown key '%s'%s", k, where);
        return;
    }
    case CYAML_ERR_ALIAS:
        problem(x, GW_E_CFG_SYNTAX, path, NULL, "*alias", "YAML aliases are not supported%s",
                where);
        return;
    case CYAML_ERR_LIBYAML_PARSER: {
        unsigned line = 0, col = 0;
        char why[200] = "YAML syntax error";

        if (!load_doc(x, &line, &col, why, sizeof(why)) && line)
            fmt_into(value, sizeof(value), "line %u, column %u", line, col);
        else
            fmt_into(value, sizeof(value), "%s", m);
        /* libcyaml's backtrace is unreliable here (it names a field not yet read):
         * the line and column locate the error. */
        problem(x, GW_E_CFG_SYNTAX, "(document)", NULL, value, "%s", why);
        return;
    }
    default: break;
    }
    if (strncmp(m, "Mapping field already seen: ", 28) == 0) {
        /* Inside a credential the key's name may be a secret, as above. */
        problem(x, GW_E_CFG_DUPLICATE_FIELD, path[0] ? path : m + 28, NULL,
                secret ? "(hidden)" : m + 28, "key written twice%s", where);
        return;
    }
    if (strncmp(m, "Invalid ", 8) == 0 && strstr(m, " value: ")) {
        /* "Invalid INT value: 'x'" or "Invalid ENUM value: maybe" */
        const char *v = strstr(m, " value: ") + 8;
        size_t vl = strlen(v);

        if (vl >= 2 && v[0] == '\'' && v[vl - 1] == '\'') {
            v++;
            vl -= 2;
        }
        fmt_into(value, sizeof(value), "%.*s", (int)vl, v);
        problem(x, GW_E_CFG_WRONG_TYPE, path[0] ? path : "(document)", NULL,
                secret ? "(hidden)" : value, "%s%s", expected_text(m + 8), where);
        return;
    }
    if (strncmp(m, "Expecting ", 10) == 0) {
        /* "Expecting INT, got event: SEQUENCE_START": show what was written instead. */
        yaml_node_t *n = NULL;

        if (load_doc(x, NULL, NULL, NULL, 0))
            n = node_of_frames(x, &e);
        node_shown(n, value, sizeof(value));
        if (secret && n && n->type == YAML_SCALAR_NODE)
            fmt_into(value, sizeof(value), "(hidden)");
        problem(x, GW_E_CFG_WRONG_TYPE, path[0] ? path : "(document)", NULL, value, "%s%s",
                expected_text(m + 10), where);
        return;
    }
    /* libcyaml's text may quote the value: not echoed inside a credential. */
    if (secret)
        m = "(hidden)";
    problem(x, GW_E_CFG_SYNTAX, path[0] ? path : "(document)", NULL, m[0] ? m : "?", "%s%s",
            cyaml_strerror(err), where);
}

/* ---- step 0: the schema walk (every unknown key and wrong type, not just the first) ---- */

/* libcyaml stops at the first schema problem. This walk checks libyaml's tree of the same
 * bytes against the same schema table (core/conf_schema.c) and reports every unknown key,
 * key written twice and value of the wrong type, then removes each from the tree, so
 * that the tree can be written back out and the later steps check the rest of the file. */
struct walk {
    struct ctx *x;
    yaml_document_t *doc;
    unsigned char *seen; /* per node: visited (a second visit means an alias) */
    size_t n_nodes;
    bool alias;
    size_t first;        /* index in x->probs of the first problem of the walk */
    struct gw_buf *gone; /* the paths of the values removed for their type, NUL-ended */
};

static yaml_node_t *
walk_node(struct walk *w, yaml_node_item_t id)
{
    return yaml_document_get_node(w->doc, id);
}

/* False the second time a node is reached: the tree shares it (an alias). */
static bool
walk_visit(struct walk *w, yaml_node_item_t id)
{
    size_t i = (size_t)id - 1;

    if (id < 1 || i >= w->n_nodes || w->seen[i]) {
        w->alias = true;
        return false;
    }
    w->seen[i] = 1;
    return true;
}

/* Keys under which a scalar may be a secret or a credential: never echoed. */
static bool
is_secret_key(const char *k)
{
    return strcmp(k, "keys") == 0 || strcmp(k, "value") == 0 || strcmp(k, "key_sha256") == 0 ||
           strcmp(k, "base_url") == 0 || strcmp(k, "key_env") == 0 || strcmp(k, "token_env") == 0 ||
           strcmp(k, "proxy") == 0 || strcmp(k, "proxy_auth") == 0;
}

/* The text of an entry's name: a mapping's scalar `name`, or, when <plain> (a group
 * member written as a plain name), the scalar itself; "" when it has none. Capped. */
static void
entry_name(yaml_document_t *doc, yaml_node_t *n, bool plain, char *out, size_t size)
{
    yaml_node_t *v = NULL;
    yaml_node_pair_t *pr;

    out[0] = '\0';
    if (n && n->type == YAML_MAPPING_NODE) {
        for (pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);

            if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == 4 &&
                memcmp(k->data.scalar.value, "name", 4) == 0)
                v = yaml_document_get_node(doc, pr->value);
        }
    } else if (plain) {
        v = n;
    }
    if (!v || v->type != YAML_SCALAR_NODE || v->data.scalar.length == 0)
        return;
    if (v->data.scalar.length > NAME_SHOWN)
        fmt_into(out, size, "%.*s...", NAME_SHOWN, (const char *)v->data.scalar.value);
    else
        fmt_into(out, size, "%.*s", (int)v->data.scalar.length, (const char *)v->data.scalar.value);
}

/* "<base>.<list>[i] (NAME)" (without "<base>." when <base> is empty, without " (NAME)"
 * when the entry has no name): the path of a list entry, named in every problem. */
static void
entry_path_doc(yaml_document_t *doc, char *out, size_t size, const char *base, const char *list,
               size_t i, yaml_node_t *entry, bool plain)
{
    char name[NAME_SHOWN + 4];

    entry_name(doc, entry, plain, name, sizeof(name));
    fmt_into(out, size, "%s%s%s[%zu]%s%s%s", base ? base : "", base && base[0] ? "." : "", list, i,
             name[0] ? " (" : "", name, name[0] ? ")" : "");
}

static bool
scalar_word_ci(const yaml_node_t *n, const cyaml_strval_t *words, uint32_t count)
{
    uint32_t i;

    for (i = 0; i < count; i++)
        if (strlen(words[i].str) == n->data.scalar.length &&
            strncasecmp(words[i].str, (const char *)n->data.scalar.value, n->data.scalar.length) ==
                0)
            return true;
    return false;
}

/* As libcyaml reads numbers: the whole scalar, integers in any C base. */
static bool
scalar_reads_as(const yaml_node_t *n, enum cyaml_type t)
{
    char buf[64], *end;

    if (n->data.scalar.length == 0 || n->data.scalar.length >= sizeof(buf))
        return false;
    memcpy(buf, n->data.scalar.value, n->data.scalar.length);
    buf[n->data.scalar.length] = '\0';
    if (memchr(buf, '\0', n->data.scalar.length))
        return false;
    errno = 0;
    if (t == CYAML_FLOAT)
        (void)strtod(buf, &end);
    else
        (void)strtoll(buf, &end, 0);
    return !errno && end != buf && !*end;
}

/* True when <n> has the shape <s> wants (children are walked separately). */
static bool
walk_type_ok(const yaml_node_t *n, const cyaml_schema_value_t *s)
{
    switch (s->type) {
    case CYAML_IGNORE: return true;
    case CYAML_MAPPING: return n->type == YAML_MAPPING_NODE;
    case CYAML_SEQUENCE: return n->type == YAML_SEQUENCE_NODE;
    case CYAML_STRING: return n->type == YAML_SCALAR_NODE;
    case CYAML_ENUM:
        return n->type == YAML_SCALAR_NODE &&
               scalar_word_ci(n, s->enumeration.strings, s->enumeration.count);
    case CYAML_INT:
    case CYAML_FLOAT: return n->type == YAML_SCALAR_NODE && scalar_reads_as(n, s->type);
    default: return true; /* not used by the schema */
    }
}

static const char *
walk_expected(const cyaml_schema_value_t *s)
{
    switch (s->type) {
    case CYAML_INT: return "expected an integer";
    case CYAML_FLOAT: return "expected a number";
    case CYAML_ENUM: return "expected true or false";
    case CYAML_STRING: return "expected a string";
    case CYAML_MAPPING: return "expected a mapping";
    case CYAML_SEQUENCE: return "expected a list";
    default: return "wrong type";
    }
}

static bool walk_value(struct walk *w, yaml_node_item_t id, const cyaml_schema_value_t *s,
                       const char *path, bool secret);

static void
walk_wrong_type(struct walk *w, const yaml_node_t *n, const cyaml_schema_value_t *s,
                const char *path, bool secret)
{
    char shown[VALUE_SHOWN + 1];

    node_shown(n, shown, sizeof(shown));
    if (secret && n->type == YAML_SCALAR_NODE)
        fmt_into(shown, sizeof(shown), "(hidden)");
    problem(w->x, GW_E_CFG_WRONG_TYPE, path[0] ? path : "(document)", NULL, shown, "%s (line %u)",
            walk_expected(s), (unsigned)n->start_mark.line + 1);
}

/* Walks the fields of a mapping; removes every pair that is refused. */
static void
walk_mapping(struct walk *w, yaml_node_t *m, const cyaml_schema_field_t *fields, const char *path,
             bool secret)
{
    yaml_node_pair_t *pr = m->data.mapping.pairs.start;
    uint64_t seen = 0;

    while (pr < m->data.mapping.pairs.top) {
        yaml_node_t *k = walk_node(w, pr->key);
        char key[64], sub[PATH_LEN];
        unsigned line = k ? (unsigned)k->start_mark.line + 1 : 0;
        const cyaml_schema_field_t *f;
        bool keep = true;

        node_shown(k, key, sizeof(key));
        for (f = fields; f->key && strcmp(f->key, key) != 0; f++)
            ;
        if (!k || k->type != YAML_SCALAR_NODE || !f->key) {
            keep = false;
            if (secret) /* inside a credential even a key's name may be a secret */
                problem(w->x, GW_E_CFG_UNKNOWN_FIELD, path, NULL, "(hidden)",
                        "unknown key in a credential (name hidden); write %s (line %u)",
                        strstr(path, "proxy_auth") ? "{env: NAME}"
                                                   : "{env: NAME} or {value: SECRET}",
                        line);
            else /* the value is not echoed: it may be a misplaced secret */
                problem(w->x, GW_E_CFG_UNKNOWN_FIELD, path, key, key, "unknown key '%s' (line %u)",
                        key, line);
        } else if (f - fields < 64 && (seen & (1ull << (f - fields)))) {
            keep = false;
            problem(w->x, GW_E_CFG_DUPLICATE_FIELD, path, key, secret ? "(hidden)" : key,
                    "key written twice (line %u)", line);
        } else {
            if (f - fields < 64) /* every table has fewer rows: a guard */
                seen |= 1ull << (f - fields);
            fmt_into(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
            keep = walk_value(w, pr->value, &f->value, sub, secret || is_secret_key(key));
            if (!keep && gw_buf_append(w->gone, sub, strlen(sub) + 1) != GW_OK)
                w->x->nomem = true;
        }
        if (keep) {
            pr++;
        } else {
            memmove(pr, pr + 1, (size_t)(m->data.mapping.pairs.top - pr - 1) * sizeof(*pr));
            m->data.mapping.pairs.top--;
        }
    }
}

/* Walks one value; false when it is refused (the caller removes it). Entries of a list
 * of the wrong type refuse the whole list, so that later entries keep their index. */
static bool
walk_value(struct walk *w, yaml_node_item_t id, const cyaml_schema_value_t *s, const char *path,
           bool secret)
{
    yaml_node_t *n = walk_node(w, id);
    yaml_node_item_t *it;
    bool ok = true;

    if (s->type == CYAML_IGNORE)
        return true; /* read from the tree by step 2, which checks it */
    if (!n || !walk_visit(w, id))
        return true; /* an alias: libcyaml refuses it after the walk */
    if (!walk_type_ok(n, s)) {
        walk_wrong_type(w, n, s, path, secret);
        return false;
    }
    if (s->type == CYAML_MAPPING) {
        walk_mapping(w, n, s->mapping.fields, path, secret);
    } else if (s->type == CYAML_SEQUENCE) {
        for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            char sub[PATH_LEN];

            entry_path_doc(w->doc, sub, sizeof(sub), "", path,
                           (size_t)(it - n->data.sequence.items.start), walk_node(w, *it), false);
            if (!walk_value(w, *it, s->sequence.entry, sub, secret))
                ok = false;
        }
    }
    return ok;
}

/* The written-back file may hold {value: SECRET} keys: wiped like the config's secrets. */
static void
buf_wipe_fini(struct gw_buf *b)
{
    if (b->data)
        explicit_bzero(b->data, b->cap);
    gw_buf_fini(b);
}

static int
on_emit(void *data, unsigned char *buf, size_t size)
{
    return gw_buf_append(data, buf, size) == GW_OK;
}

/* Writes <doc> back out as YAML into <out> (and deletes <doc>, as libyaml's dumper does).
 * False on failure (out of memory: x->nomem set). */
static bool
emit_doc(struct ctx *x, yaml_document_t *doc, struct gw_buf *out)
{
    yaml_emitter_t e;
    bool ok;

    if (!yaml_emitter_initialize(&e)) {
        yaml_document_delete(doc);
        x->nomem = true;
        return false;
    }
    yaml_emitter_set_output(&e, on_emit, out);
    yaml_emitter_set_unicode(&e, 1);
    yaml_emitter_set_width(&e, -1);
    ok = yaml_emitter_open(&e) && yaml_emitter_dump(&e, doc) && yaml_emitter_close(&e);
    if (!ok && e.error == YAML_MEMORY_ERROR)
        x->nomem = true;
    yaml_emitter_delete(&e);
    yaml_document_delete(doc); /* a no-op when the dumper already deleted it */
    return ok;
}

static void
problems_drop(struct gw_conf_problems *p, size_t i)
{
    gw_free(p->v[i].path);
    gw_free(p->v[i].value);
    gw_free(p->v[i].msg);
    memmove(&p->v[i], &p->v[i + 1], (p->n - i - 1) * sizeof(p->v[0]));
    p->n--;
}

/* Step 0. Returns what the later steps do: WALK_CLEAN (no schema problem: check the
 * bytes as they are), WALK_PRUNED (problems recorded; <clean> holds the file without
 * the refused keys and values, to check the rest; <gone> the paths of the values removed
 * for their type), WALK_STOP (problems recorded and
 * nothing more can be checked: the document is not a mapping). A file libyaml cannot
 * read, or that has aliases, is WALK_CLEAN: libcyaml reports it as before. */
enum walk_result { WALK_CLEAN, WALK_PRUNED, WALK_STOP };

static enum walk_result
schema_walk(struct ctx *x, struct gw_buf *clean, struct gw_buf *gone)
{
    struct walk w = {x, NULL, NULL, 0, false, x->probs->n, gone};
    yaml_document_t doc;
    yaml_parser_t p;
    yaml_node_t *root;
    bool loaded;

    if (!yaml_parser_initialize(&p)) {
        x->nomem = true;
        return WALK_CLEAN;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)x->yaml, x->len);
    loaded = yaml_parser_load(&p, &doc) != 0;
    if (!loaded && p.error == YAML_MEMORY_ERROR)
        x->nomem = true;
    yaml_parser_delete(&p);
    if (!loaded)
        return WALK_CLEAN;
    w.doc = &doc;
    root = yaml_document_get_root_node(&doc);
    w.n_nodes = (size_t)(doc.nodes.top - doc.nodes.start);
    w.seen = gw_calloc(w.n_nodes ? w.n_nodes : 1, 1);
    if (!w.seen) {
        x->nomem = true;
        yaml_document_delete(&doc);
        return WALK_CLEAN;
    }
    if (root && !walk_value(&w, 1, &gw_conf_file_schema, "", false) && !w.alias) {
        gw_free(w.seen);
        yaml_document_delete(&doc);
        return WALK_STOP; /* the document is not a mapping */
    }
    gw_free(w.seen);
    if (w.alias) /* libcyaml refuses aliases: let it say so, alone */
        while (x->probs->n > w.first)
            problems_drop(x->probs, x->probs->n - 1);
    if (x->probs->n == w.first) {
        yaml_document_delete(&doc);
        return WALK_CLEAN;
    }
    if (!emit_doc(x, &doc, clean))
        return WALK_STOP;
    return WALK_PRUNED;
}

/* True when problem path <p> lies under <q> (equal, or a field or entry of it). */
static bool
path_under(const char *p, const char *q)
{
    size_t n = strlen(q);

    return strncmp(p, q, n) == 0 && (p[n] == '\0' || p[n] == '.' || p[n] == '[' || p[n] == ' ');
}

/* After a pruned walk, drops the later problems about a value the walk removed for its
 * type (<gone>: so later steps do not also call it missing): one line per mistake. */
static void
drop_echoes(struct gw_conf_problems *p, size_t n_walk, const struct gw_buf *gone)
{
    size_t i = n_walk, j;

    while (i < p->n) {
        bool echo = false;

        for (j = 0; j < gone->len && !echo; j += strlen(gone->data + j) + 1)
            echo = path_under(p->v[i].path, gone->data + j);
        if (echo)
            problems_drop(p, i);
        else
            i++;
    }
}

/* ---- defaults ---- */

enum gw_code
gw_conf_defaults(struct gw_conf *c)
{
    c->server.workers = 0;
    c->server.max_body_mb = 32;
    c->server.max_header_kb = 64;
    c->server.max_headers = 100;
    c->server.header_timeout_secs = 10;
    c->server.idle_timeout_secs = 60;
    c->server.body_timeout_secs = 60;
    c->server.max_buffered_body_mb = 256;
    c->server.max_connections = 0;
    c->server.drain_secs = 30;
    c->control.listen.port = 8081;
    c->log.format = GW_LOG_TEXT;
    c->log.level = GW_LOG_INFO;
    c->store.map_size_mb = 4096;
    c->store.responses = true;
    c->retention.row_days = 31;
    c->failover.failures_to_pause = 3;
    c->failover.pause_secs = 60;
    c->failover.max_pause_secs = 600;
    c->failover.stream_start_wait_secs = 15;
    c->failover.next_on_slow_start = false;
    c->failover.slot_wait_secs = 30;
    c->failover.connect_timeout_ms = 10000;
    c->failover.first_byte_timeout_secs = 300;
    c->failover.read_idle_timeout_secs = 300;
    gw_free(c->control.listen.host);
    gw_free(c->control.token_env);
    gw_free(c->store.path);
    gw_free(c->prices_path);
    c->control.listen.host = gw_strdup("127.0.0.1");
    c->control.token_env = gw_strdup("GW_CONTROL_TOKEN");
    c->store.path = gw_strdup("gw-data");
    c->prices_path = gw_strdup("prices.yaml"); /* prices_explicit stays false */
    c->prices_explicit = false;
    if (!c->control.listen.host || !c->control.token_env || !c->store.path || !c->prices_path)
        return GW_E_NOMEM;
    return GW_OK;
}

/* ---- step 3: build and check, section by section ---- */

/* server.tls.listen: TLS addresses beside the plain ones of server.listen; left out, the
 * server.listen addresses are served in TLS instead. An address in both lists would be
 * bound twice (SO_REUSEPORT accepts that and splits the connections), so it is refused. */
static void
build_tls_listen(struct ctx *x, const struct gw_conf_file_tls *ft)
{
    struct gw_conf *c = x->c;
    char base[PATH_LEN];
    unsigned i;
    size_t j;

    if (!ft->listen) {
        c->server.tls_on_listen = true;
        return;
    }
    c->server.tls_listen = gw_calloc(ft->listen_count, sizeof(*c->server.tls_listen));
    if (!c->server.tls_listen) {
        x->nomem = true;
        return;
    }
    c->server.n_tls_listen = ft->listen_count;
    for (i = 0; i < ft->listen_count; i++) {
        struct gw_conf_addr *a = &c->server.tls_listen[i];

        fmt_into(base, sizeof(base), "server.tls.listen[%u]", i);
        if (!parse_listen(x, ft->listen[i], a)) {
            problem(x, GW_E_CFG_BAD_LISTEN, base, NULL, ft->listen[i],
                    "expected \"host:port\" or \"[v6]:port\" with port 0..65535 (0: any free "
                    "port)");
            continue;
        }
        for (j = 0; a->port && a->host && j < c->server.n_listen; j++)
            if (c->server.listen[j].host && c->server.listen[j].port == a->port &&
                strcmp(c->server.listen[j].host, a->host) == 0)
                problem(x, GW_E_CFG_BAD_LISTEN, base, NULL, ft->listen[i],
                        "also in server.listen: an address serves either plain HTTP or TLS");
    }
}

static void
build_server(struct ctx *x, const struct gw_conf_file_server *fs)
{
    struct gw_conf *c = x->c;
    char base[PATH_LEN];
    unsigned i;

    if (!fs || fs->listen_count == 0) {
        missing(x, "server", "listen", "at least one listen address (\"host:port\")");
    } else {
        c->server.listen = gw_calloc(fs->listen_count, sizeof(*c->server.listen));
        if (!c->server.listen) {
            x->nomem = true;
            return;
        }
        c->server.n_listen = fs->listen_count;
        for (i = 0; i < fs->listen_count; i++) {
            fmt_into(base, sizeof(base), "server.listen[%u]", i);
            if (!parse_listen(x, fs->listen[i], &c->server.listen[i]))
                problem(x, GW_E_CFG_BAD_LISTEN, base, NULL, fs->listen[i],
                        "expected \"host:port\" or \"[v6]:port\" with port 0..65535 (0: any free "
                        "port)");
        }
    }
    if (!fs)
        return;
    take_int(x, "server", "workers", fs->workers, 0, 256, GW_E_CFG_RANGE, &c->server.workers);
    take_int(x, "server", "max_body_mb", fs->max_body_mb, 1, 1024, GW_E_CFG_RANGE,
             &c->server.max_body_mb);
    take_int(x, "server", "max_header_kb", fs->max_header_kb, 1, 1024, GW_E_CFG_RANGE,
             &c->server.max_header_kb);
    take_int(x, "server", "max_headers", fs->max_headers, 1, 10000, GW_E_CFG_RANGE,
             &c->server.max_headers);
    take_int(x, "server", "header_timeout_secs", fs->header_timeout_secs, 1, 3600, GW_E_CFG_RANGE,
             &c->server.header_timeout_secs);
    take_int(x, "server", "idle_timeout_secs", fs->idle_timeout_secs, 1, 3600, GW_E_CFG_RANGE,
             &c->server.idle_timeout_secs);
    take_int(x, "server", "drain_secs", fs->drain_secs, 0, 3600, GW_E_CFG_RANGE,
             &c->server.drain_secs);
    take_int(x, "server", "body_timeout_secs", fs->body_timeout_secs, 1, 3600, GW_E_CFG_RANGE,
             &c->server.body_timeout_secs);
    take_int(x, "server", "max_connections", fs->max_connections, 0, 1000000, GW_E_CFG_RANGE,
             &c->server.max_connections);
    if (!fs->max_buffered_body_mb && c->server.max_buffered_body_mb < c->server.max_body_mb)
        c->server.max_buffered_body_mb = c->server.max_body_mb; /* the default follows */
    else if (take_int(x, "server", "max_buffered_body_mb", fs->max_buffered_body_mb, 1, 1048576,
                      GW_E_CFG_RANGE, &c->server.max_buffered_body_mb) &&
             c->server.max_buffered_body_mb < c->server.max_body_mb) {
        char num[32];

        snprintf(num, sizeof(num), "%u", c->server.max_buffered_body_mb);
        problem(x, GW_E_CFG_RANGE, "server", "max_buffered_body_mb", num,
                "must be at least server.max_body_mb (%u), or no body of that size could be read",
                c->server.max_body_mb);
    }
    if (fs->tls) {
        if (!fs->tls->cert)
            missing(x, "server.tls", "cert", "the certificate file (PEM)");
        else if (!fs->tls->cert[0])
            problem(x, GW_E_CFG_BAD_VALUE, "server.tls", "cert", "", "must be a file path");
        else
            c->server.tls_cert = resolve_path(x, fs->tls->cert);
        if (!fs->tls->key)
            missing(x, "server.tls", "key", "the private key file (PEM)");
        else if (!fs->tls->key[0])
            problem(x, GW_E_CFG_BAD_VALUE, "server.tls", "key", "", "must be a file path");
        else
            c->server.tls_key = resolve_path(x, fs->tls->key);
        build_tls_listen(x, fs->tls);
        if (c->server.tls_cert && c->server.tls_key && x->env && x->env->check_tls) {
            char why[256] = "";
            enum gw_code code = x->env->check_tls(x->env->arg, c->server.tls_cert,
                                                  c->server.tls_key, why, sizeof(why));

            if (code == GW_E_CFG_TLS_KEY)
                problem(x, code, "server.tls", "key", c->server.tls_key, "%s", why);
            else if (code != GW_OK)
                problem(x, GW_E_CFG_TLS_CERT, "server.tls", "cert", c->server.tls_cert, "%s", why);
        }
    }
}

static void
build_control(struct ctx *x, const struct gw_conf_file_control *fc)
{
    struct gw_conf *c = x->c;
    const char *tok;

    if (fc && fc->listen && !parse_listen(x, fc->listen, &c->control.listen))
        problem(x, GW_E_CFG_BAD_LISTEN, "control", "listen", fc->listen,
                "expected \"host:port\" or \"[v6]:port\" with port 0..65535 (0: any free port)");
    if (fc && fc->token_env) {
        if (!is_valid_env_name(fc->token_env)) {
            /* Not echoed: a token pasted here instead of a variable's name. */
            problem(x, GW_E_CFG_BAD_VALUE, "control", "token_env", "(hidden)",
                    "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
            return;
        }
        gw_free(c->control.token_env);
        c->control.token_env = dup_s(x, fc->token_env);
    }
    if (!c->control.token_env)
        return;
    tok = env_get(x, c->control.token_env);
    if (tok && tok[0])
        c->control.token = dup_s(x, tok); /* unset: the control API refuses all but /healthz */
}

/* log.format and log.level: applied by net at start and on every reload. */
static void
build_log(struct ctx *x, const struct gw_conf_file_log *fl)
{
    if (!fl)
        return;
    take_word(x, "log", "format", fl->format, log_format_words, "text, json", &x->c->log.format);
    take_word(x, "log", "level", fl->level, log_level_words, "error, warn, info, debug",
              &x->c->log.level);
}

static void
build_store(struct ctx *x, const struct gw_conf_file *f)
{
    struct gw_conf *c = x->c;
    char *p;

    if (f->store && f->store->path) {
        if (!f->store->path[0]) {
            problem(x, GW_E_CFG_BAD_VALUE, "store", "path", "", "must be a folder path");
        } else {
            gw_free(c->store.path);
            c->store.path = dup_s(x, f->store->path);
        }
    }
    if (c->store.path) {
        p = resolve_path(x, c->store.path);
        gw_free(c->store.path);
        c->store.path = p;
    }
    if (f->store) {
        take_int(x, "store", "map_size_mb", f->store->map_size_mb, 16, 1048576, GW_E_CFG_RANGE,
                 &c->store.map_size_mb);
        take_bool(f->store->responses, &c->store.responses); /* strict words: the schema */
    }
    if (f->retention)
        take_int(x, "retention", "row_days", f->retention->row_days, 1, 3650, GW_E_CFG_RANGE,
                 &c->retention.row_days);
    if (f->prices) {
        if (!f->prices[0]) {
            problem(x, GW_E_CFG_BAD_VALUE, "prices", NULL, "", "must be a file path");
        } else {
            gw_free(c->prices_path);
            c->prices_path = dup_s(x, f->prices);
            c->prices_explicit = true;
        }
    }
    if (c->prices_path) { /* the default "prices.yaml" lives next to the config, too */
        p = resolve_path(x, c->prices_path);
        gw_free(c->prices_path);
        c->prices_path = p;
    }
}

static void
build_failover(struct ctx *x, const struct gw_conf_file_failover *ff)
{
    struct gw_conf *c = x->c;
    bool wait_ok, pause_ok, max_ok;

    if (!ff)
        return;
    take_int(x, "failover", "failures_to_pause", ff->failures_to_pause, 1, 100, GW_E_CFG_RANGE,
             &c->failover.failures_to_pause);
    pause_ok = take_int(x, "failover", "pause_secs", ff->pause_secs, 1, 86400, GW_E_CFG_RANGE,
                        &c->failover.pause_secs);
    max_ok = take_int(x, "failover", "max_pause_secs", ff->max_pause_secs, 1, 86400, GW_E_CFG_RANGE,
                      &c->failover.max_pause_secs);
    if (pause_ok && max_ok && c->failover.max_pause_secs < c->failover.pause_secs) {
        char num[32];

        snprintf(num, sizeof(num), "%u", c->failover.max_pause_secs);
        problem(x, GW_E_CFG_RANGE, "failover", "max_pause_secs", num,
                "must be at least pause_secs (%u)", c->failover.pause_secs);
    }
    wait_ok = take_int(x, "failover", "stream_start_wait_secs", ff->stream_start_wait_secs, 1, 120,
                       GW_E_CFG_RANGE, &c->failover.stream_start_wait_secs);
    take_bool(ff->next_on_slow_start, &c->failover.next_on_slow_start);
    if (wait_ok && c->failover.next_on_slow_start && c->failover.stream_start_wait_secs < 5) {
        char num[32];

        snprintf(num, sizeof(num), "%u", c->failover.stream_start_wait_secs);
        problem(x, GW_E_CFG_SLOW_START_TOO_SHORT, "failover", "stream_start_wait_secs", num,
                "must be at least 5 when next_on_slow_start is true");
    }
    take_int(x, "failover", "slot_wait_secs", ff->slot_wait_secs, 0, 300, GW_E_CFG_RANGE,
             &c->failover.slot_wait_secs);
    take_int(x, "failover", "connect_timeout_ms", ff->connect_timeout_ms, 1, 600000, GW_E_CFG_RANGE,
             &c->failover.connect_timeout_ms);
    take_int(x, "failover", "first_byte_timeout_secs", ff->first_byte_timeout_secs, 1, 3600,
             GW_E_CFG_RANGE, &c->failover.first_byte_timeout_secs);
    take_int(x, "failover", "read_idle_timeout_secs", ff->read_idle_timeout_secs, 1, 3600,
             GW_E_CFG_RANGE, &c->failover.read_idle_timeout_secs);
}

/* ---- providers ---- */

/* One secret written as {env: NAME} or {value: SECRET} at <path> into <out>; a
 * problem when it is neither, both, empty or names an unset variable. */
static void
resolve_cred(struct ctx *x, const char *path, const struct gw_conf_file_key *fk,
             struct gw_conf_cred *out)
{
    const char *v;

    if ((fk->env != NULL) == (fk->value != NULL)) {
        problem(x, GW_E_CFG_KEY_SOURCE, path, NULL, fk->env ? "(env and value)" : "(neither)",
                "write exactly one of {env: NAME} or {value: SECRET}");
        return;
    }
    if (fk->value) {
        if (!fk->value[0])
            problem(x, GW_E_CFG_KEY_SOURCE, path, "value", "(hidden)", "the secret is empty");
        else
            out->secret = dup_s(x, fk->value);
        return;
    }
    if (!is_valid_env_name(fk->env)) {
        /* Not echoed: a key pasted here instead of a variable's name. */
        problem(x, GW_E_CFG_BAD_VALUE, path, "env", "(hidden)",
                "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
        return;
    }
    out->env = dup_s(x, fk->env);
    v = env_get(x, fk->env);
    if (!v || !v[0])
        problem(x, GW_E_CFG_ENV_UNSET, path, "env", fk->env,
                "environment variable %s is unset or empty", fk->env);
    else
        out->secret = dup_s(x, v);
}

/* An AWS region name: lower-case letters, digits and '-', 1..32 of them. */
static bool
is_valid_region(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > 32)
        return false;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

static void
build_keys(struct ctx *x, const char *base, const struct gw_conf_file_provider *fp,
           struct gw_conf_provider *p)
{
    char kb[PATH_LEN];
    unsigned k;

    if (fp->keys_count == 0) {
        problem(x, GW_E_CFG_NO_KEYS, base, "keys", "(none)",
                "at least one credential ({env: NAME} or {value: SECRET}) is required");
        return;
    }
    if (fp->keys_count > 16) {
        char shown[32];

        /* core/quota.h keeps one unit per credential, GW_QUOTA_MAX_CREDS (16) at most. */
        snprintf(shown, sizeof(shown), "(%u keys)", fp->keys_count);
        problem(x, GW_E_CFG_TOO_MANY_KEYS, base, "keys", shown,
                "a provider holds at most 16 credentials");
    }
    p->keys = gw_calloc(fp->keys_count, sizeof(*p->keys));
    if (!p->keys) {
        x->nomem = true;
        return;
    }
    p->n_keys = fp->keys_count;
    for (k = 0; k < fp->keys_count; k++) {
        fmt_into(kb, sizeof(kb), "%s.keys[%u]", base, k);
        resolve_cred(x, kb, &fp->keys[k], &p->keys[k]);
    }
}

/* dialect bedrock: aws.region and the credentials that sign (docs/config.md, "AWS
 * Bedrock"); keys[0] becomes a copy of the secret access key so that quotas, rows and
 * fingerprints see one credential. base_url defaults to the region's endpoint. */
static void
build_aws(struct ctx *x, const char *base, const struct gw_conf_file_provider *fp,
          struct gw_conf_provider *p)
{
    const struct gw_conf_file_aws *a = fp->aws;
    char ab[PATH_LEN], kb[PATH_LEN];

    if (fp->keys_count) {
        problem(x, GW_E_CFG_AWS, base, "keys", "(keys)",
                "dialect bedrock signs with aws: {region, access_key_id, secret_access_key}, "
                "not keys");
        return;
    }
    if (!a) {
        problem(x, GW_E_CFG_AWS, base, "aws", "(none)",
                "dialect bedrock needs aws: {region, access_key_id, secret_access_key}");
        return;
    }
    fmt_into(ab, sizeof(ab), "%s.aws", base);
    if (!a->region || !is_valid_region(a->region))
        problem(x, GW_E_CFG_AWS, ab, "region", a->region ? a->region : "(none)",
                "an AWS region such as us-east-1 ([a-z0-9-]{1,32})");
    else
        p->aws_region = dup_s(x, a->region);
    if (!a->access_key_id || !a->secret_access_key) {
        problem(x, GW_E_CFG_AWS, ab, a->access_key_id ? "secret_access_key" : "access_key_id",
                "(none)",
                "both access_key_id and secret_access_key ({env: NAME} or "
                "{value: SECRET}) are required");
        return;
    }
    fmt_into(kb, sizeof(kb), "%s.access_key_id", ab);
    resolve_cred(x, kb, a->access_key_id, &p->aws_key_id);
    fmt_into(kb, sizeof(kb), "%s.secret_access_key", ab);
    resolve_cred(x, kb, a->secret_access_key, &p->aws_secret);
    if (a->session_token) {
        fmt_into(kb, sizeof(kb), "%s.session_token", ab);
        resolve_cred(x, kb, a->session_token, &p->aws_token);
    }
    p->keys = gw_calloc(1, sizeof(*p->keys));
    if (!p->keys) {
        x->nomem = true;
        return;
    }
    p->n_keys = 1;
    p->keys[0].env = p->aws_secret.env ? dup_s(x, p->aws_secret.env) : NULL;
    p->keys[0].secret = p->aws_secret.secret ? dup_s(x, p->aws_secret.secret) : NULL;
}

static void
build_model_specs(struct ctx *x, const char *base, yaml_node_t *ms, struct gw_conf_provider *p)
{
    static const char *const fields[] = {"context_window", "max_output_tokens", "input", "output",
                                         "cache_read",     "cache_write",       NULL};
    char sb[PATH_LEN], shown[VALUE_SHOWN + 1];
    yaml_node_pair_t *pr, *q;
    size_t n;

    if (!ms)
        return;
    fmt_into(sb, sizeof(sb), "%s.model_specs", base);
    if (ms->type != YAML_MAPPING_NODE) {
        problem(x, GW_E_CFG_WRONG_TYPE, sb, NULL, node_kind(ms),
                "expected a mapping of model id to {context_window, max_output_tokens, ...}");
        return;
    }
    n = (size_t)(ms->data.mapping.pairs.top - ms->data.mapping.pairs.start);
    if (n == 0)
        return;
    p->model_specs = gw_calloc(n, sizeof(*p->model_specs));
    if (!p->model_specs) {
        x->nomem = true;
        return;
    }
    for (pr = ms->data.mapping.pairs.start; pr < ms->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = node_at(x, pr->key), *v = node_at(x, pr->value);
        struct gw_conf_model_spec *s;
        char mb[PATH_LEN];

        if (!k || k->type != YAML_SCALAR_NODE || !v)
            continue;
        node_shown(k, shown, sizeof(shown));
        fmt_into(mb, sizeof(mb), "%s.%s", sb, shown);
        if (k->data.scalar.length == 0 || strspn(shown, " \t") == strlen(shown)) {
            problem(x, GW_E_CFG_MODEL_SPEC_BLANK_MODEL, sb, NULL, shown,
                    "a model id must not be blank");
            continue;
        }
        for (q = ms->data.mapping.pairs.start; q < pr; q++)
            if (scalar_is(node_at(x, q->key), shown))
                break;
        if (q < pr) {
            problem(x, GW_E_CFG_DUPLICATE_FIELD, mb, NULL, shown, "model written twice");
            continue;
        }
        if (strcmp(shown, "*") == 0) {
            /* A spec describes one model; "*" would give every model one context window. */
            problem(x, GW_E_CFG_MODEL_SPEC_WILDCARD, sb, NULL, shown,
                    "a model spec names one model id, not \"*\"");
            continue;
        }
        if ((v->type == YAML_SCALAR_NODE && v->data.scalar.length == 0) ||
            (v->type == YAML_MAPPING_NODE &&
             v->data.mapping.pairs.top == v->data.mapping.pairs.start)) {
            problem(x, GW_E_CFG_MODEL_SPEC_EMPTY, mb, NULL,
                    v->type == YAML_MAPPING_NODE ? "{}" : "(nothing)",
                    "write at least one of context_window, max_output_tokens, input, output, "
                    "cache_read, cache_write");
            continue;
        }
        if (v->type != YAML_MAPPING_NODE) {
            node_shown(v, shown, sizeof(shown));
            problem(x, GW_E_CFG_WRONG_TYPE, mb, NULL, shown, "expected a mapping");
            continue;
        }
        s = &p->model_specs[p->n_model_specs++];
        s->model = scalar_dup(x, k);
        s->input = s->output = s->cache_read = s->cache_write = -1;
        for (q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
            yaml_node_t *fk = node_at(x, q->key), *fv = node_at(x, q->value);
            char key[64];
            int64_t iv;
            double dv;
            int fi;

            node_shown(fk, key, sizeof(key));
            fi = word_index(key, fields);
            node_shown(fv, shown, sizeof(shown));
            if (fi < 0) {
                problem(x, GW_E_CFG_UNKNOWN_FIELD, mb, key, key, "unknown key '%s'", key);
            } else if (fi < 2) {
                if (!scalar_int(fv, &iv))
                    problem(x, GW_E_CFG_WRONG_TYPE, mb, key, shown, "expected an integer");
                else if (iv == 0)
                    problem(x, GW_E_CFG_MODEL_SPEC_ZERO, mb, key, shown,
                            "must be 1..100000000 tokens (leave it out when unknown)");
                else if (iv < 1 || iv > 100000000)
                    problem(x, GW_E_CFG_RANGE, mb, key, shown, "must be 1..100000000 tokens");
                else if (fi == 0)
                    s->context_window = (uint64_t)iv;
                else
                    s->max_output_tokens = (uint64_t)iv;
            } else {
                double *dst[] = {&s->input, &s->output, &s->cache_read, &s->cache_write};

                if (!scalar_num(fv, &dv))
                    problem(x, GW_E_CFG_WRONG_TYPE, mb, key, shown, "expected a number");
                else if (dv < 0 || dv > 1000000)
                    problem(x, GW_E_CFG_RANGE, mb, key, shown,
                            "must be 0..1000000 (USD per 1M tokens)");
                else
                    *dst[fi - 2] = dv;
            }
        }
    }
}

static void
take_quota_win(struct ctx *x, const char *base, yaml_node_t *m, struct gw_conf_quota_win *w)
{
    static const char *const axes[] = {"rpm", "tpm", "rpd", "tpd", NULL};
    uint64_t *dst[] = {&w->rpm, &w->tpm, &w->rpd, &w->tpd};
    yaml_node_pair_t *q;

    for (q = m->data.mapping.pairs.start; q < m->data.mapping.pairs.top; q++) {
        char key[64], shown[VALUE_SHOWN + 1];
        int64_t iv;
        int fi;

        node_shown(node_at(x, q->key), key, sizeof(key));
        node_shown(node_at(x, q->value), shown, sizeof(shown));
        fi = word_index(key, axes);
        if (fi < 0)
            problem(x, GW_E_CFG_UNKNOWN_FIELD, base, key, key, "unknown key '%s'", key);
        else if (!scalar_int(node_at(x, q->value), &iv))
            problem(x, GW_E_CFG_WRONG_TYPE, base, key, shown, "expected an integer");
        else if (iv < 1)
            problem(x, GW_E_CFG_RANGE, base, key, shown, "must be at least 1");
        else
            *dst[fi] = (uint64_t)iv;
    }
}

static void
build_quota(struct ctx *x, const char *base, const struct gw_conf_file_quota *fq, yaml_node_t *qm,
            struct gw_conf_provider *p)
{
    char qb[PATH_LEN], shown[VALUE_SHOWN + 1];
    yaml_node_pair_t *pr;
    int pool = 0;
    size_t n;

    if (!fq)
        return;
    p->has_quota = true;
    fmt_into(qb, sizeof(qb), "%s.quota", base);
    if (fq->dflt) {
        const struct gw_conf_file_quota_win *w = fq->dflt;
        char db[PATH_LEN];

        fmt_into(db, sizeof(db), "%s.default", qb);
        take_u64(x, db, "rpm", w->rpm, 1, INT64_MAX, &p->quota_default.rpm);
        take_u64(x, db, "tpm", w->tpm, 1, INT64_MAX, &p->quota_default.tpm);
        take_u64(x, db, "rpd", w->rpd, 1, INT64_MAX, &p->quota_default.rpd);
        take_u64(x, db, "tpd", w->tpd, 1, INT64_MAX, &p->quota_default.tpd);
    }
    if (take_word(x, qb, "pool", fq->pool, pool_words, "model, account", &pool))
        p->quota_pool = (enum gw_quota_pool)pool;
    {
        uint64_t cap = p->quota_local_cap_secs;

        /* A day at most: a cooldown never lasts longer (core/quota.h). */
        if (take_u64(x, qb, "local_cooldown_cap_secs", fq->local_cooldown_cap_secs, 0, 86400, &cap))
            p->quota_local_cap_secs = (unsigned)cap;
    }
    take_bool(fq->probes, &p->quota_probes);
    if (!qm)
        return;
    if (p->quota_pool == GW_QUOTA_POOL_ACCOUNT && qm->type == YAML_MAPPING_NODE &&
        qm->data.mapping.pairs.top > qm->data.mapping.pairs.start) {
        /* One quota across models has no per-model windows to override. */
        problem(x, GW_E_CFG_QUOTA_ACCOUNT_MODELS, qb, "models", "(pool: account)",
                "per-model quotas need pool: model; with pool: account use quota.default");
        return;
    }
    if (qm->type != YAML_MAPPING_NODE) {
        problem(x, GW_E_CFG_WRONG_TYPE, qb, "models", node_kind(qm),
                "expected a mapping of model id to {rpm, tpm, rpd, tpd}");
        return;
    }
    n = (size_t)(qm->data.mapping.pairs.top - qm->data.mapping.pairs.start);
    if (n == 0)
        return;
    p->quota_models = gw_calloc(n, sizeof(*p->quota_models));
    if (!p->quota_models) {
        x->nomem = true;
        return;
    }
    for (pr = qm->data.mapping.pairs.start; pr < qm->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = node_at(x, pr->key), *v = node_at(x, pr->value);
        struct gw_conf_quota_model *qmod;
        char mb[PATH_LEN];

        if (!k || k->type != YAML_SCALAR_NODE || !v)
            continue;
        node_shown(k, shown, sizeof(shown));
        fmt_into(mb, sizeof(mb), "%s.models.%s", qb, shown);
        if (k->data.scalar.length == 0) {
            problem(x, GW_E_CFG_MODEL_SPEC_BLANK_MODEL, qb, "models", "",
                    "a model id must not be blank");
            continue;
        }
        if (k->data.scalar.length == 1 && k->data.scalar.value[0] == '*') {
            /* quota.default is the quota of every model. */
            problem(x, GW_E_CFG_MODEL_SPEC_WILDCARD, qb, "models", "*",
                    "a per-model quota names one model id, not \"*\" (use quota.default)");
            continue;
        }
        if (v->type != YAML_MAPPING_NODE) {
            node_shown(v, shown, sizeof(shown));
            problem(x, GW_E_CFG_WRONG_TYPE, mb, NULL, shown, "expected a mapping");
            continue;
        }
        qmod = &p->quota_models[p->n_quota_models++];
        qmod->model = scalar_dup(x, k);
        take_quota_win(x, mb, v, &qmod->win);
    }
}

/* How a refused base_url is shown: "(hidden)" when it may hold a credential, that is
 * userinfo (user:password@), a query (?api_key=...) or a fragment; else as written. */
/* ---- egress: the proxy and the CA file ---- */

/* <url> into p's proxy fields, or a problem at <base>.proxy. <from> names the variable
 * it came from (userinfo allowed there), NULL for the file's own proxy. */
static void
take_proxy_url(struct ctx *x, const char *base, const char *url, const char *from,
               struct gw_conf_provider *p)
{
    struct gw_proxy_url u;
    const char *why = gw_proxy_url_parse(url, from != NULL, &u);
    char shown[VALUE_SHOWN + 1];

    if (why && !why[0]) {
        x->nomem = true;
        return;
    }
    if (why) {
        gw_proxy_url_shown(url, shown, sizeof(shown));
        if (from)
            problem(x, GW_E_CFG_PROXY, base, "proxy", shown,
                    "%s (from the environment variable %s; proxy: none connects directly)", why,
                    from);
        else
            problem(x, GW_E_CFG_PROXY, base, "proxy", shown, "%s", why);
        return;
    }
    p->proxy_host = u.host;
    p->proxy_port = u.port;
    p->proxy_auth = u.auth;
    p->proxy_from = dup_s(x, from ? from : "proxy");
}

/* The first of <names> set and not empty in the environment (its name in *<name>). */
static const char *
env_first(struct ctx *x, const char *const *names, const char **name)
{
    for (; *names; names++) {
        const char *v = env_get(x, *names);

        if (v && v[0]) {
            *name = *names;
            return v;
        }
    }
    return NULL;
}

/* providers[].proxy, proxy_auth, ca_file, and the environment's proxy (curl's
 * variables: lower case first, as curl reads them). Runs after base_url is parsed. */
static void
build_egress(struct ctx *x, const char *base, const struct gw_conf_file_provider *fp,
             struct gw_conf_provider *p)
{
    static const char *const https_vars[] = {"https_proxy", "HTTPS_PROXY", NULL};
    static const char *const http_vars[] = {"http_proxy", "HTTP_PROXY", NULL};
    static const char *const no_vars[] = {"no_proxy", "NO_PROXY", NULL};
    bool off = fp->proxy && (!fp->proxy[0] || strcasecmp(fp->proxy, "none") == 0);
    char ab[PATH_LEN];

    if (fp->proxy && !off) {
        take_proxy_url(x, base, fp->proxy, NULL, p);
    } else if (!off && p->host) {
        const char *name = NULL, *no_name = NULL;
        const char *url = env_first(x, p->tls ? https_vars : http_vars, &name);

        if (url && !gw_no_proxy_match(env_first(x, no_vars, &no_name), p->host, p->port))
            take_proxy_url(x, base, url, name, p);
    }
    fmt_into(ab, sizeof(ab), "%s.proxy_auth", base);
    if (fp->proxy_auth) {
        const char *env = fp->proxy_auth->env, *v;

        if (off) {
            problem(x, GW_E_CFG_PROXY, ab, NULL, "(hidden)",
                    "proxy_auth is set while proxy is none; remove one of them");
        } else if (!env) {
            missing(x, ab, "env", "the variable holding \"user:password\"");
        } else if (!is_valid_env_name(env)) {
            problem(x, GW_E_CFG_BAD_VALUE, ab, "env", "(hidden)",
                    "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
        } else if (!(v = env_get(x, env)) || !v[0]) {
            problem(x, GW_E_CFG_ENV_UNSET, ab, "env", env,
                    "environment variable %s is unset or empty", env);
        } else if (!strchr(v, ':')) {
            problem(x, GW_E_CFG_PROXY, ab, "env", env,
                    "environment variable %s must hold \"user:password\"", env);
        } else if (p->proxy_host) { /* wins over a userinfo of an environment URL */
            wipe_free(p->proxy_auth);
            p->proxy_auth = dup_s(x, v);
        }
    }
    if (fp->ca_file) {
        if (!fp->ca_file[0])
            problem(x, GW_E_CFG_BAD_VALUE, base, "ca_file", "", "must be a file path");
        else if (p->host && !p->tls)
            problem(x, GW_E_CFG_CA_FILE, base, "ca_file", fp->ca_file,
                    "applies to https:// upstreams only (base_url is http://)");
        else
            p->ca_file = resolve_path(x, fp->ca_file);
        if (p->ca_file && x->env && x->env->check_ca_file) {
            char why[256] = "";
            const char *bad = x->env->check_ca_file(x->env->arg, p->ca_file, why, sizeof(why));

            if (bad)
                problem(x, GW_E_CFG_CA_FILE, base, "ca_file", p->ca_file, "%s", bad);
        }
    }
}

static const char *
url_shown(const char *url)
{
    return strpbrk(url, "@?#") ? "(hidden)" : url;
}

static void
build_provider(struct ctx *x, unsigned i, const struct gw_conf_file_provider *fp, yaml_node_t *tree)
{
    struct gw_conf_provider *p = &x->c->providers[i];
    char base[PATH_LEN];
    const char *why;
    unsigned j;
    int w = 0;

    entry_path_doc(&x->doc, base, sizeof(base), NULL, "providers", i, tree, false);
    p->index = i;
    p->enabled = true;
    p->quota_local_cap_secs = 5;
    p->quota_probes = true;
    if (!fp->name)
        missing(x, base, "name", "a name ([a-z0-9._-]{1,64})");
    else if (!is_valid_name(fp->name))
        problem(x, GW_E_CFG_BAD_NAME, base, "name", fp->name, "must match [a-z0-9._-]{1,64}");
    else
        p->name = dup_s(x, fp->name);
    if (!fp->dialect)
        missing(x, base, "dialect", "a dialect (openai, responses, anthropic, gemini, bedrock)");
    else if ((w = word_index(fp->dialect, dialect_words)) < 0)
        problem(x, GW_E_CFG_BAD_DIALECT, base, "dialect", fp->dialect,
                "must be one of openai, responses, anthropic, gemini, bedrock");
    else
        p->dialect = (enum gw_dialect)w;
    if (!fp->base_url && p->dialect == GW_DIALECT_BEDROCK && fp->aws && fp->aws->region &&
        is_valid_region(fp->aws->region)) {
        char url[96];

        /* AWS's endpoint of the region (docs/config.md, "AWS Bedrock"). */
        fmt_into(url, sizeof(url), "https://bedrock-runtime.%s.amazonaws.com", fp->aws->region);
        p->base_url = dup_s(x, url);
        if (p->base_url && (why = parse_base_url(x, url, p)) != NULL)
            problem(x, GW_E_CFG_BAD_URL, base, "base_url", url, "%s", why);
    } else if (!fp->base_url) {
        if (p->dialect != GW_DIALECT_BEDROCK)
            missing(x, base, "base_url", "a base URL (http(s)://host[:port][/prefix])");
    } else {
        p->base_url = dup_s(x, fp->base_url);
        why = parse_base_url(x, fp->base_url, p);
        if (why) /* a URL that may hold a credential is not echoed */
            problem(x, GW_E_CFG_BAD_URL, base, "base_url", url_shown(fp->base_url), "%s", why);
    }
    if (p->dialect == GW_DIALECT_BEDROCK)
        build_aws(x, base, fp, p);
    else if (fp->aws)
        problem(x, GW_E_CFG_AWS, base, "aws", "(aws)",
                "aws: is read only with dialect bedrock (other dialects take keys)");
    else
        build_keys(x, base, fp, p);
    if (fp->models_count == 0) {
        problem(x, GW_E_CFG_NO_MODELS, base, "models", "(none)",
                "list at least one model, or \"*\" for every model");
    } else {
        p->models = gw_calloc(fp->models_count, sizeof(*p->models));
        if (!p->models) {
            x->nomem = true;
            return;
        }
        p->n_models = fp->models_count;
        for (j = 0; j < fp->models_count; j++) {
            char mb[PATH_LEN];

            fmt_into(mb, sizeof(mb), "%s.models[%u]", base, j);
            if (!fp->models[j][0])
                problem(x, GW_E_CFG_BAD_VALUE, mb, NULL, "", "a model id must not be empty");
            p->models[j] = dup_s(x, fp->models[j]);
            if (strcmp(fp->models[j], "*") == 0)
                p->any_model = true;
        }
    }
    take_bool(fp->enabled, &p->enabled);
    take_int(x, base, "max_concurrent", fp->max_concurrent, 1, 1000, GW_E_CFG_PROVIDER_CONCURRENCY,
             &p->max_concurrent);
    if (fp->min_speed) {
        char sb[PATH_LEN];

        fmt_into(sb, sizeof(sb), "%s.min_speed", base);
        if (!fp->min_speed->tokens_per_sec)
            missing(x, sb, "tokens_per_sec", "tokens_per_sec (1..1000)");
        if (!fp->min_speed->window_secs)
            missing(x, sb, "window_secs", "window_secs (5..120)");
        take_int(x, sb, "tokens_per_sec", fp->min_speed->tokens_per_sec, 1, 1000,
                 GW_E_CFG_MIN_SPEED_RANGE, &p->min_speed_tps);
        take_int(x, sb, "window_secs", fp->min_speed->window_secs, 5, 120, GW_E_CFG_MIN_SPEED_RANGE,
                 &p->min_speed_window_secs);
    }
    build_model_specs(x, base, map_get(x, tree, "model_specs"), p);
    if (take_word(x, base, "billing", fp->billing, billing_words, "metered, free", &w))
        p->billing = fp->billing ? (enum gw_billing)w : GW_BILLING_METERED;
    w = GW_HTTP2_AUTO;
    if (take_word(x, base, "http2", fp->http2, http2_words, "auto, on, off", &w))
        p->http2 = (enum gw_http2)w;
    build_quota(x, base, fp->quota, map_get(x, map_get(x, tree, "quota"), "models"), p);
    build_egress(x, base, fp, p);
}

static void
build_providers(struct ctx *x, const struct gw_conf_file *f)
{
    struct gw_conf *c = x->c;
    yaml_node_t *seq = map_get(x, yaml_document_get_root_node(&x->doc), "providers");
    unsigned i, j;

    if (f->providers_count == 0) {
        missing(x, NULL, "providers", "at least one provider");
        return;
    }
    c->providers = gw_calloc(f->providers_count, sizeof(*c->providers));
    if (!c->providers) {
        x->nomem = true;
        return;
    }
    c->n_providers = f->providers_count;
    for (i = 0; i < f->providers_count; i++)
        build_provider(x, i, &f->providers[i], seq_get(x, seq, i));
    for (i = 0; i < c->n_providers; i++)
        for (j = 0; j < i; j++)
            if (c->providers[i].name && c->providers[j].name &&
                strcmp(c->providers[i].name, c->providers[j].name) == 0) {
                char base[PATH_LEN];

                entry_path_doc(&x->doc, base, sizeof(base), NULL, "providers", i,
                               seq_get(x, seq, i), false);
                problem(x, GW_E_CFG_DUPLICATE_NAME, base, "name", c->providers[i].name,
                        "already used by providers[%u]", j);
                break;
            }
}

/* ---- groups ---- */

/* What a member check needs to know about its group and the file. */
struct group_view {
    const struct gw_conf_file *f; /* provider names as written (so that a provider refused
                                   * for its name does not also make members unknown) */
    bool lb_known;                /* the type was valid (else lb checks are noise) */
    bool lb;                      /* type: load-balance */
};

static bool
file_has_provider(const struct gw_conf_file *f, const char *name)
{
    unsigned k;

    for (k = 0; k < f->providers_count; k++)
        if (f->providers[k].name && strcmp(f->providers[k].name, name) == 0)
            return true;
    return false;
}

/* Reads one member: a plain provider name (weight 1, plain = true) or {name, weight,
 * model}. <mb> is its path ("groups[0].providers[1]"). */
static void
build_member(struct ctx *x, const char *mb, yaml_node_t *n, const struct group_view *gv,
             struct gw_conf_member *m)
{
    static const char *const keys[] = {"name", "weight", "model", NULL};
    char shown[VALUE_SHOWN + 1];
    yaml_node_pair_t *q;
    bool named = false;

    m->weight = 1;
    if (n->type == YAML_SCALAR_NODE) {
        m->plain = true;
        if (n->data.scalar.length == 0)
            problem(x, GW_E_CFG_BAD_VALUE, mb, NULL, "", "a provider name must not be empty");
        m->provider = scalar_dup(x, n);
        return;
    }
    if (n->type != YAML_MAPPING_NODE) {
        problem(x, GW_E_CFG_WRONG_TYPE, mb, NULL, node_kind(n),
                "expected a provider name or {name, weight, model}");
        return;
    }
    for (q = n->data.mapping.pairs.start; q < n->data.mapping.pairs.top; q++) {
        yaml_node_t *k = node_at(x, q->key), *v = node_at(x, q->value);
        char key[64];
        int64_t iv;
        int fi;

        node_shown(k, key, sizeof(key));
        node_shown(v, shown, sizeof(shown));
        fi = word_index(key, keys);
        if (fi < 0) {
            problem(x, GW_E_CFG_UNKNOWN_FIELD, mb, key, key, "unknown key '%s'", key);
        } else if (fi == 1) {
            m->weight_set = true;
            if (!scalar_int(v, &iv))
                problem(x, GW_E_CFG_WRONG_TYPE, mb, key, shown, "expected an integer");
            else if (gv->lb_known && !gv->lb)
                problem(x, GW_E_ENG_GROUP_WEIGHT_NOT_LB, mb, key, shown,
                        "weights apply to load-balance groups only; remove it or set "
                        "type: load-balance");
            else if (iv < 1 || iv > 100)
                problem(x, GW_E_ENG_GROUP_WEIGHT_RANGE, mb, key, shown, "must be 1..100");
            else
                m->weight = (unsigned)iv;
        } else if (!v || v->type != YAML_SCALAR_NODE) {
            problem(x, GW_E_CFG_WRONG_TYPE, mb, key, shown, "expected a string");
        } else if (fi == 0) {
            named = true;
            gw_free(m->provider);
            m->provider = scalar_dup(x, v);
        } else {
            gw_free(m->model);
            m->model = scalar_dup(x, v);
        }
    }
    if (!named)
        missing(x, mb, "name", "the provider's name");
}

/* Cross-member checks of one group: every member names a provider, and none twice. */
static void
check_members(struct ctx *x, const char *base, yaml_node_t *mem, const struct group_view *gv,
              const struct gw_conf_group *g)
{
    size_t j, k;

    for (j = 0; j < g->n_members; j++) {
        const struct gw_conf_member *m = &g->members[j];
        char mb[PATH_LEN];

        if (!m->provider || !m->provider[0])
            continue; /* already reported (missing or empty name) */
        /* The path names the field that holds the name: the item itself when plain. */
        entry_path_doc(&x->doc, mb, sizeof(mb) - 5, base, "providers", j, seq_get(x, mem, j), true);
        if (!m->plain)
            strcat(mb, ".name");
        if (!file_has_provider(gv->f, m->provider)) {
            problem(x, GW_E_ENG_GROUP_UNKNOWN_MEMBER, mb, NULL, m->provider,
                    "no provider has this name");
            continue;
        }
        for (k = 0; k < j; k++)
            if (g->members[k].provider && strcmp(g->members[k].provider, m->provider) == 0) {
                problem(x, GW_E_ENG_GROUP_DUPLICATE_MEMBER, mb, NULL, m->provider,
                        "already member providers[%zu] of this group", k);
                break;
            }
    }
}

static void
build_group(struct ctx *x, unsigned i, const struct gw_conf_file *f, yaml_node_t *tree)
{
    const struct gw_conf_file_group *fg = &f->groups[i];
    struct gw_conf_group *g = &x->c->groups[i];
    yaml_node_t *mem = map_get(x, tree, "providers");
    struct group_view gv = {f, false, false};
    char base[PATH_LEN];
    size_t n, j;
    int w = 0;

    entry_path_doc(&x->doc, base, sizeof(base), NULL, "groups", i, tree, false);
    g->index = i;
    if (!fg->name)
        missing(x, base, "name", "a name (what clients ask for as the model)");
    else if (!fg->name[0])
        problem(x, GW_E_CFG_BAD_NAME, base, "name", "", "must not be empty");
    else
        g->name = dup_s(x, fg->name);
    if (take_word(x, base, "type", fg->type, group_type_words,
                  "fallback, load-balance, url-test, cheapest", &w)) {
        g->type = fg->type ? (enum gw_group_type)w : GW_GROUP_FALLBACK;
        gv.lb_known = true;
        gv.lb = g->type == GW_GROUP_LOAD_BALANCE;
    }
    if (fg->model) {
        if (!fg->model[0])
            problem(x, GW_E_CFG_BAD_VALUE, base, "model", "",
                    "a model id must not be empty (leave it out to ask for the requested name)");
        g->model = dup_s(x, fg->model);
    }
    if (take_word(x, base, "balance_by", fg->balance_by, balance_words,
                  "weights, latency, health, latency-health", &w) &&
        fg->balance_by) {
        g->balance_by = (enum gw_balance_by)w;
        g->balance_by_set = true;
        if (gv.lb_known && !gv.lb)
            problem(x, GW_E_ENG_GROUP_BALANCE_NOT_LB, base, "balance_by", fg->balance_by,
                    "balance_by applies to load-balance groups only; this group is %s",
                    gw_group_type_str(g->type));
    }
    if (!mem) {
        problem(x, GW_E_ENG_GROUP_EMPTY, base, "providers", "(none)",
                "a group needs at least one member (a provider name or {name, weight, "
                "model})");
        return;
    }
    if (mem->type != YAML_SEQUENCE_NODE) {
        char shown[VALUE_SHOWN + 1];

        node_shown(mem, shown, sizeof(shown));
        problem(x, GW_E_CFG_WRONG_TYPE, base, "providers", shown, "expected a list");
        return;
    }
    n = (size_t)(mem->data.sequence.items.top - mem->data.sequence.items.start);
    if (n == 0) {
        problem(x, GW_E_ENG_GROUP_EMPTY, base, "providers", "[]",
                "a group needs at least one member (a provider name or {name, weight, "
                "model})");
        return;
    }
    g->members = gw_calloc(n, sizeof(*g->members));
    if (!g->members) {
        x->nomem = true;
        return;
    }
    g->n_members = n;
    for (j = 0; j < n; j++) {
        char mb[PATH_LEN];
        yaml_node_t *it = seq_get(x, mem, j);

        entry_path_doc(&x->doc, mb, sizeof(mb), base, "providers", j, it, true);
        if (it)
            build_member(x, mb, it, &gv, &g->members[j]);
    }
    check_members(x, base, mem, &gv, g);
}

static void
build_groups(struct ctx *x, const struct gw_conf_file *f)
{
    struct gw_conf *c = x->c;
    yaml_node_t *seq = map_get(x, yaml_document_get_root_node(&x->doc), "groups");
    unsigned i, j;

    if (f->groups_count == 0)
        return;
    c->groups = gw_calloc(f->groups_count, sizeof(*c->groups));
    if (!c->groups) {
        x->nomem = true;
        return;
    }
    c->n_groups = f->groups_count;
    for (i = 0; i < f->groups_count; i++)
        build_group(x, i, f, seq_get(x, seq, i));
    for (i = 0; i < c->n_groups; i++)
        for (j = 0; j < i; j++)
            if (c->groups[i].name && c->groups[j].name &&
                strcmp(c->groups[i].name, c->groups[j].name) == 0) {
                char base[PATH_LEN];

                entry_path_doc(&x->doc, base, sizeof(base), NULL, "groups", i, seq_get(x, seq, i),
                               false);
                problem(x, GW_E_ENG_GROUP_DUPLICATE_NAME, base, "name", c->groups[i].name,
                        "already the name of groups[%u]", j);
                break;
            }
}

/* ---- clients ---- */

/* DESIGN.md 8: one measure per entry, positive, cost at least 0.01 USD, cache_reads on
 * tokens only, no period and measure twice, and retention long enough to rebuild the
 * period from the rows (day 1, week 7, month 31 days). */
static void
check_limit(struct ctx *x, const char *lb, const struct gw_conf_file_limit *fl,
            const struct gw_conf_limit *l, const struct gw_conf_client *cl, unsigned k)
{
    static const unsigned need_days[] = {0, 0, 1, 7, 31}; /* minute hour day week month */
    unsigned measures = l->has_requests + l->has_tokens + l->has_cost, j;
    char num[48];

    if (!fl->per)
        return; /* reported as missing */
    if (measures == 0)
        problem(x, GW_E_CFG_KEY_LIMIT_EMPTY, lb, NULL, fl->per,
                "an entry needs one measure: requests, tokens or cost");
    if (measures > 1)
        problem(x, GW_E_CFG_KEY_LIMIT_TWO_MEASURES, lb, NULL, fl->per,
                "one measure per entry: write another entry for the other");
    if ((l->has_requests && l->requests == 0) || (l->has_tokens && l->tokens == 0) ||
        (l->has_cost && fl->cost && *fl->cost <= 0)) {
        snprintf(num, sizeof(num), "%s", l->has_requests ? "0" : l->has_tokens ? "0" : "<= 0");
        problem(x, GW_E_CFG_KEY_LIMIT_NOT_POSITIVE, lb,
                l->has_requests ? "requests"
                : l->has_tokens ? "tokens"
                                : "cost",
                num, "a limit must be positive");
    } else if (l->has_cost && fl->cost && *fl->cost < 0.01) {
        snprintf(num, sizeof(num), "%g", *fl->cost);
        problem(x, GW_E_CFG_KEY_LIMIT_COST_TOO_SMALL, lb, "cost", num,
                "a cost limit is at least 0.01 (USD)");
    }
    if (fl->cache_reads && !l->has_tokens)
        problem(x, GW_E_CFG_KEY_LIMIT_CACHE_READS, lb, "cache_reads", "true",
                "cache_reads applies to a tokens limit only");
    for (j = 0; j < k && measures == 1; j++) {
        const struct gw_conf_limit *o = &cl->limits[j];

        if (o->per == l->per && o->has_requests == l->has_requests &&
            o->has_tokens == l->has_tokens && o->has_cost == l->has_cost)
            problem(x, GW_E_CFG_KEY_LIMIT_DUPLICATE, lb, NULL, fl->per,
                    "the same period and measure as limits[%u]", j);
    }
    if ((unsigned)l->per < sizeof(need_days) / sizeof(need_days[0]) &&
        x->c->retention.row_days < need_days[l->per]) {
        snprintf(num, sizeof(num), "%u", x->c->retention.row_days);
        problem(x, GW_E_CFG_KEY_LIMIT_RETENTION, "retention", "row_days", num,
                "rows must be kept %u days to rebuild %s.limits[%u] (%s)", need_days[l->per], lb, k,
                fl->per);
    }
}

static void
build_limits(struct ctx *x, const char *base, const struct gw_conf_file_client *fc,
             struct gw_conf_client *cl)
{
    unsigned k;

    if (fc->limits_count == 0)
        return;
    cl->limits = gw_calloc(fc->limits_count, sizeof(*cl->limits));
    if (!cl->limits) {
        x->nomem = true;
        return;
    }
    cl->n_limits = fc->limits_count;
    for (k = 0; k < fc->limits_count; k++) {
        const struct gw_conf_file_limit *fl = &fc->limits[k];
        struct gw_conf_limit *l = &cl->limits[k];
        char lb[PATH_LEN];
        int per = 0;

        fmt_into(lb, sizeof(lb), "%s.limits[%u]", base, k);
        if (!fl->per)
            missing(x, lb, "per", "per (minute, hour, day, week, month)");
        else if (take_word(x, lb, "per", fl->per, per_words, "minute, hour, day, week, month",
                           &per))
            l->per = (enum gw_limit_per)per;
        l->has_requests = fl->requests != NULL;
        l->has_tokens = fl->tokens != NULL;
        l->has_cost = fl->cost != NULL;
        take_u64(x, lb, "requests", fl->requests, 0, INT64_MAX, &l->requests);
        take_u64(x, lb, "tokens", fl->tokens, 0, INT64_MAX, &l->tokens);
        if (fl->cost) {
            if (!isfinite(*fl->cost) || *fl->cost < 0 || *fl->cost > 1e9) {
                char num[48];

                snprintf(num, sizeof(num), "%g", *fl->cost);
                problem(x, GW_E_CFG_RANGE, lb, "cost", num, "must be 0..1000000000 (USD)");
            } else {
                l->cost_micros = (uint64_t)(*fl->cost * 1e6 + 0.5);
            }
        }
        take_bool(fl->cache_reads, &l->cache_reads);
        check_limit(x, lb, fl, l, cl, k);
    }
}

/* Builds clients[i]; true when its key digest is set (so it can be compared). */
static bool
build_client(struct ctx *x, unsigned i, const struct gw_conf_file_client *fc, yaml_node_t *tree)
{
    struct gw_conf_client *cl = &x->c->clients[i];
    char base[PATH_LEN];
    bool key_ok = false;
    unsigned j;

    entry_path_doc(&x->doc, base, sizeof(base), NULL, "clients", i, tree, false);
    cl->index = i;
    if (!fc->name)
        missing(x, base, "name", "a name ([a-z0-9._-]{1,64})");
    else if (!is_valid_name(fc->name))
        problem(x, GW_E_CFG_BAD_NAME, base, "name", fc->name, "must match [a-z0-9._-]{1,64}");
    else
        cl->name = dup_s(x, fc->name);
    if ((fc->key_sha256 != NULL) == (fc->key_env != NULL)) {
        problem(x, GW_E_CFG_KEY_SOURCE, base, NULL,
                fc->key_env ? "(key_sha256 and key_env)" : "(neither)",
                "write exactly one of key_sha256 or key_env");
    } else if (fc->key_sha256) {
        key_ok = gw_hex_decode32(gw_str_c(fc->key_sha256), cl->key_digest);
        if (!key_ok) {
            char shown[48];

            /* Not echoed: a key pasted here by mistake would be a secret. */
            snprintf(shown, sizeof(shown), "(%zu characters)", strlen(fc->key_sha256));
            problem(x, GW_E_CFG_BAD_SHA256, base, "key_sha256", shown,
                    "must be 64 hex characters: the SHA-256 of the key (sha256sum)");
        }
    } else if (!is_valid_env_name(fc->key_env)) {
        /* Not echoed: a gateway key pasted here instead of a variable's name. */
        problem(x, GW_E_CFG_BAD_VALUE, base, "key_env", "(hidden)",
                "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
    } else {
        const char *v = env_get(x, fc->key_env);

        cl->key_env = dup_s(x, fc->key_env);
        if (!v || !v[0] || !x->env->sha256)
            problem(x, GW_E_CFG_ENV_UNSET, base, "key_env", fc->key_env,
                    "environment variable %s is unset or empty", fc->key_env);
        else {
            x->env->sha256(v, strlen(v), cl->key_digest);
            key_ok = true;
        }
    }
    take_int(x, base, "max_concurrent", fc->max_concurrent, 1, 1000, GW_E_CFG_RANGE,
             &cl->max_concurrent);
    if (fc->models_count) {
        cl->models = gw_calloc(fc->models_count, sizeof(*cl->models));
        if (!cl->models) {
            x->nomem = true;
            return key_ok;
        }
        cl->n_models = fc->models_count;
        for (j = 0; j < fc->models_count; j++) {
            char mb[PATH_LEN];

            fmt_into(mb, sizeof(mb), "%s.models[%u]", base, j);
            if (!fc->models[j][0])
                problem(x, GW_E_CFG_BAD_VALUE, mb, NULL, "", "a model id must not be empty");
            cl->models[j] = dup_s(x, fc->models[j]);
        }
    }
    build_limits(x, base, fc, cl);
    return key_ok;
}

static void
build_clients(struct ctx *x, const struct gw_conf_file *f)
{
    struct gw_conf *c = x->c;
    yaml_node_t *seq = map_get(x, yaml_document_get_root_node(&x->doc), "clients");
    bool *has_key;
    unsigned i, j;

    if (f->clients_count == 0)
        return;
    c->clients = gw_calloc(f->clients_count, sizeof(*c->clients));
    has_key = gw_calloc(f->clients_count, sizeof(*has_key));
    if (!c->clients || !has_key) {
        gw_free(has_key);
        x->nomem = true;
        return;
    }
    c->n_clients = f->clients_count;
    for (i = 0; i < f->clients_count; i++)
        has_key[i] = build_client(x, i, &f->clients[i], seq_get(x, seq, i));
    for (i = 0; i < c->n_clients; i++) {
        char base[PATH_LEN];

        entry_path_doc(&x->doc, base, sizeof(base), NULL, "clients", i, seq_get(x, seq, i), false);
        for (j = 0; j < i; j++)
            if (c->clients[i].name && c->clients[j].name &&
                strcmp(c->clients[i].name, c->clients[j].name) == 0) {
                problem(x, GW_E_CFG_DUPLICATE_NAME, base, "name", c->clients[i].name,
                        "already used by clients[%u]", j);
                break;
            }
        for (j = 0; j < i; j++)
            if (has_key[i] && has_key[j] &&
                memcmp(c->clients[i].key_digest, c->clients[j].key_digest, 32) == 0) {
                const struct gw_conf_file_client *fc = &f->clients[i];

                problem(x, GW_E_CFG_DUPLICATE_KEY, base, fc->key_env ? "key_env" : "key_sha256",
                        fc->key_env ? fc->key_env : "(same digest)",
                        "the same gateway key as clients[%u]", j);
                break;
            }
    }
    gw_free(has_key);
}

/* ---- shared with core/conf_prices.c ---- */

/* The libcyaml configuration of every load: the gw allocator, error-level text kept in
 * <log>, and no aliases (a config does not need them, and expanding them is how a small
 * file becomes a huge one). */
static cyaml_config_t
cyaml_cfg(struct gw_buf *log)
{
    const cyaml_config_t cfg = {
        .log_fn = on_cyaml_log,
        .log_ctx = log,
        .mem_fn = on_cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        .flags = CYAML_CFG_NO_ALIAS,
    };

    return cfg;
}

enum gw_code
gw_conf_cyaml_load(const char *yaml, size_t len, const cyaml_schema_value_t *schema, void **out,
                   struct gw_conf_problems *probs)
{
    struct gw_buf log = {0};
    const cyaml_config_t cfg = cyaml_cfg(&log);
    cyaml_data_t *data = NULL;
    struct ctx x = {0};
    cyaml_err_t err;
    enum gw_code rc = GW_OK;

    *out = NULL;
    x.probs = probs;
    x.yaml = yaml ? yaml : "";
    x.len = yaml ? len : 0;
    err = cyaml_load_data((const uint8_t *)x.yaml, x.len, &cfg, schema, &data, NULL);
    if (err == CYAML_ERR_OOM) {
        rc = GW_E_NOMEM;
    } else if (err != CYAML_OK) {
        report_cyaml_error(&x, err, log.data ? log.data : "");
        rc = x.nomem ? GW_E_NOMEM : probs->n ? probs->v[0].code : GW_E_CFG_SYNTAX;
    } else {
        *out = data;
    }
    if (x.have_doc)
        yaml_document_delete(&x.doc);
    gw_buf_fini(&log);
    if (rc == GW_E_NOMEM)
        gw_conf_problems_fini(probs);
    return rc;
}

void
gw_conf_cyaml_free(const cyaml_schema_value_t *schema, void *data)
{
    struct gw_buf log = {0};
    const cyaml_config_t cfg = cyaml_cfg(&log);

    if (data)
        cyaml_free(&cfg, schema, data, 0);
    gw_buf_fini(&log);
}

/* ---- entry point ---- */

enum gw_code
gw_conf_parse(const char *yaml, size_t len, const char *dir, const struct gw_conf_env *env,
              struct gw_conf **out, struct gw_conf_problems *probs)
{
    static const struct gw_conf_file empty;
    struct gw_buf log = {0};
    const cyaml_config_t cfg = cyaml_cfg(&log);
    struct gw_conf_file *f = NULL;
    struct gw_buf clean = {0}, gone = {0};
    enum walk_result walked = WALK_CLEAN;
    struct ctx x = {0};
    size_t n_walk = 0;
    cyaml_err_t err;
    enum gw_code rc;

    *out = NULL;
    x.probs = probs;
    x.env = env;
    x.yaml = yaml ? yaml : "";
    x.len = yaml ? len : 0;
    x.c = gw_calloc(1, sizeof(*x.c));
    if (!x.c || gw_conf_defaults(x.c) != GW_OK)
        goto nomem;
    x.c->dir = gw_strdup(dir ? dir : "");
    if (!x.c->dir)
        goto nomem;

    walked = schema_walk(&x, &clean, &gone);
    if (x.nomem)
        goto nomem;
    if (walked == WALK_STOP)
        goto refuse;
    n_walk = probs->n;
    if (walked == WALK_PRUNED) { /* check the rest of the file: the walk removed the refused */
        x.yaml = clean.data ? clean.data : "";
        x.len = clean.len;
    }
    err = cyaml_load_data((const uint8_t *)x.yaml, x.len, &cfg, &gw_conf_file_schema,
                          (cyaml_data_t **)&f, NULL);
    if (err == CYAML_ERR_OOM)
        goto nomem;
    if (err != CYAML_OK) {
        report_cyaml_error(&x, err, log.data ? log.data : "");
        goto refuse;
    }
    if (!load_doc(&x, NULL, NULL, NULL, 0)) {
        if (x.nomem)
            goto nomem;
        problem(&x, GW_E_CFG_SYNTAX, "(document)", NULL, "", "YAML error");
        goto refuse;
    }
    {
        const struct gw_conf_file *ff = f ? f : &empty; /* an empty document */

        build_server(&x, ff->server);
        build_control(&x, ff->control);
        build_log(&x, ff->log);
        build_store(&x, ff);
        build_failover(&x, ff->failover);
        build_providers(&x, ff);
        build_groups(&x, ff);
        build_clients(&x, ff);
    }
    if (x.nomem)
        goto nomem;
    if (walked == WALK_PRUNED)
        drop_echoes(probs, n_walk, &gone);
    if (probs->n)
        goto refuse;
    cyaml_free(&cfg, &gw_conf_file_schema, f, 0);
    if (x.have_doc)
        yaml_document_delete(&x.doc);
    gw_buf_fini(&log);
    buf_wipe_fini(&clean);
    gw_buf_fini(&gone);
    *out = x.c;
    return GW_OK;

refuse:
    if (x.nomem)
        goto nomem;
    rc = probs->n ? probs->v[0].code : GW_E_CFG_SYNTAX;
    if (f)
        cyaml_free(&cfg, &gw_conf_file_schema, f, 0);
    if (x.have_doc)
        yaml_document_delete(&x.doc);
    gw_buf_fini(&log);
    buf_wipe_fini(&clean);
    gw_buf_fini(&gone);
    gw_conf_free(x.c);
    return rc;

nomem:
    if (f)
        cyaml_free(&cfg, &gw_conf_file_schema, f, 0);
    if (x.have_doc)
        yaml_document_delete(&x.doc);
    gw_buf_fini(&log);
    buf_wipe_fini(&clean);
    gw_buf_fini(&gone);
    gw_conf_free(x.c);
    gw_conf_problems_fini(probs);
    return GW_E_NOMEM;
}

/* ---- teardown ---- */

static void
free_strv(char **v, size_t n)
{
    size_t i;

    for (i = 0; v && i < n; i++)
        gw_free(v[i]);
    gw_free(v);
}

void
gw_conf_free(struct gw_conf *c)
{
    size_t i, j;

    if (!c)
        return;
    for (i = 0; c->server.listen && i < c->server.n_listen; i++)
        gw_free(c->server.listen[i].host);
    gw_free(c->server.listen);
    gw_free(c->server.tls_cert);
    gw_free(c->server.tls_key);
    for (i = 0; c->server.tls_listen && i < c->server.n_tls_listen; i++)
        gw_free(c->server.tls_listen[i].host);
    gw_free(c->server.tls_listen);
    gw_free(c->control.listen.host);
    gw_free(c->control.token_env);
    wipe_free(c->control.token);
    gw_free(c->store.path);
    for (i = 0; c->providers && i < c->n_providers; i++) {
        struct gw_conf_provider *p = &c->providers[i];

        gw_free(p->name);
        gw_free(p->base_url);
        gw_free(p->host);
        gw_free(p->path_prefix);
        for (j = 0; p->keys && j < p->n_keys; j++) {
            gw_free(p->keys[j].env);
            wipe_free(p->keys[j].secret);
        }
        gw_free(p->keys);
        gw_free(p->aws_region);
        cred_free(&p->aws_key_id);
        cred_free(&p->aws_secret);
        cred_free(&p->aws_token);
        free_strv(p->models, p->n_models);
        for (j = 0; p->model_specs && j < p->n_model_specs; j++)
            gw_free(p->model_specs[j].model);
        gw_free(p->model_specs);
        for (j = 0; p->quota_models && j < p->n_quota_models; j++)
            gw_free(p->quota_models[j].model);
        gw_free(p->quota_models);
        gw_free(p->proxy_host);
        wipe_free(p->proxy_auth);
        gw_free(p->proxy_from);
        gw_free(p->ca_file);
    }
    gw_free(c->providers);
    for (i = 0; c->clients && i < c->n_clients; i++) {
        struct gw_conf_client *cl = &c->clients[i];

        gw_free(cl->name);
        gw_free(cl->key_env);
        free_strv(cl->models, cl->n_models);
        gw_free(cl->limits);
    }
    gw_free(c->clients);
    for (i = 0; c->groups && i < c->n_groups; i++) {
        struct gw_conf_group *g = &c->groups[i];

        gw_free(g->name);
        gw_free(g->model);
        for (j = 0; g->members && j < g->n_members; j++) {
            gw_free(g->members[j].provider);
            gw_free(g->members[j].model);
        }
        gw_free(g->members);
    }
    gw_free(c->groups);
    gw_free(c->prices_path);
    gw_prices_free(c->prices);
    gw_free(c->dir);
    gw_free(c);
}

void
gw_conf_problems_fini(struct gw_conf_problems *p)
{
    size_t i;

    for (i = 0; p->v && i < p->n; i++) {
        gw_free(p->v[i].path);
        gw_free(p->v[i].value);
        gw_free(p->v[i].msg);
    }
    gw_free(p->v);
    p->v = NULL;
    p->n = 0;
}

void
gw_conf_problem_format(const struct gw_conf_problem *p, char *buf, size_t size)
{
    if (size == 0)
        return;
    snprintf(buf, size, "%s: %s (%s) %s", p->path ? p->path : "", p->value ? p->value : "",
             gw_code_str(p->code), p->msg ? p->msg : "");
}

/* ---- lookups ---- */

static bool
slice_eq(const char *s, const char *p, size_t n)
{
    return strlen(s) == n && memcmp(s, p, n) == 0;
}

static bool
provider_serves(const struct gw_conf_provider *p, const char *model, size_t len)
{
    size_t i;

    if (p->any_model)
        return true;
    for (i = 0; i < p->n_models; i++)
        if (slice_eq(p->models[i], model, len))
            return true;
    return false;
}

size_t
gw_conf_candidates(const struct gw_conf *c, const char *model, size_t model_len,
                   const struct gw_conf_provider **out, size_t max)
{
    size_t i, n = 0;

    for (i = 0; i < c->n_providers && n < max; i++)
        if (c->providers[i].enabled && provider_serves(&c->providers[i], model, model_len))
            out[n++] = &c->providers[i];
    return n;
}

const struct gw_conf_client *
gw_conf_client_by_digest(const struct gw_conf *c, const unsigned char digest[32])
{
    const struct gw_conf_client *found = NULL;
    size_t i;

    /* Every client is compared, with no early exit, so the time does not tell which
     * (or whether one) matched. Digests are unique (config.duplicate_client_key). */
    for (i = 0; i < c->n_clients; i++) {
        bool eq = gw_ct_equal(c->clients[i].key_digest, digest, 32);

        found = eq ? &c->clients[i] : found;
    }
    return found;
}

bool
gw_conf_client_allows(const struct gw_conf_client *cl, const char *model, size_t len)
{
    size_t i;

    if (cl->n_models == 0)
        return true;
    for (i = 0; i < cl->n_models; i++)
        if (slice_eq(cl->models[i], model, len) || strcmp(cl->models[i], "*") == 0)
            return true;
    return false;
}

/* ---- names ---- */

static const char *
word_or_unknown(const char *const *words, size_t count, unsigned i)
{
    return i < count ? words[i] : "unknown";
}

const char *
gw_dialect_str(enum gw_dialect d)
{
    return word_or_unknown(dialect_words, 5, (unsigned)d);
}

const char *
gw_billing_str(enum gw_billing b)
{
    return word_or_unknown(billing_words, 2, (unsigned)b);
}

const char *
gw_group_type_str(enum gw_group_type t)
{
    return word_or_unknown(group_type_words, 4, (unsigned)t);
}

const char *
gw_balance_by_str(enum gw_balance_by b)
{
    return word_or_unknown(balance_words, 4, (unsigned)b);
}

const char *
gw_limit_per_str(enum gw_limit_per p)
{
    return word_or_unknown(per_words, 5, (unsigned)p);
}

/* ---- lookups by name ---- */

static bool
name_is(const char *have, const char *name, size_t len)
{
    return strlen(have) == len && memcmp(have, name, len) == 0;
}

const struct gw_conf_group *
gw_conf_group_find(const struct gw_conf *c, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < c->n_groups; i++)
        if (name_is(c->groups[i].name, name, len))
            return &c->groups[i];
    return NULL;
}

const struct gw_conf_provider *
gw_conf_provider_find(const struct gw_conf *c, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < c->n_providers; i++)
        if (name_is(c->providers[i].name, name, len))
            return &c->providers[i];
    return NULL;
}

const struct gw_conf_client *
gw_conf_client_find(const struct gw_conf *c, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < c->n_clients; i++)
        if (name_is(c->clients[i].name, name, len))
            return &c->clients[i];
    return NULL;
}
