/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_yaml_edit.c - feeds arbitrary config texts and edits to
 * gw_yaml_set_model_spec. Input: "<provider>\n<model>\n<op byte><YAML text>"; the op
 * byte's bits 0-1 choose the context_window op (keep, set, remove, set out of range),
 * bits 2-3 the max_output_tokens op. Every input must end in a text or a code, never a
 * crash or a leak; an error leaves no text. When the input and the edited text are both
 * valid configs, the edited entry must be exactly the one asked for, and the other
 * providers' entries must not change.
 * A provider line starting with '@' fuzzes gw_yaml_set_entry instead:
 * "@<list digit><name>\n<entry JSON, empty: remove>\n<op byte><YAML text>" (list digit
 * 0 providers, 1 groups, 2 clients). When the input and the edited text are both valid
 * configs: a removed entry is gone and its list one shorter, a set entry is there under
 * the entry's name, and the other lists keep their length.
 * Owns:    one edit at a time.
 * Threads: single-threaded.
 * See:     core/yaml_edit.h, tests/fuzz/corpus/yaml_edit/
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "core/str.h"
#include "core/yaml_edit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
fuzz_getenv(void *arg, const char *name)
{
    (void)arg;
    (void)name;
    return "fuzz-secret-value";
}

static void
fuzz_sha256(const void *data, size_t len, unsigned char out[32])
{
    const unsigned char *d = data;
    size_t i;

    memset(out, 0, 32);
    for (i = 0; i < len; i++)
        out[i % 32] ^= d[i];
}

static const struct gw_conf_env env = {fuzz_getenv, fuzz_sha256, NULL, NULL, NULL};

static void
op_of(unsigned bits, uint64_t val, enum gw_yaml_op *op, uint64_t *v)
{
    static const enum gw_yaml_op ops[4] = {GW_YAML_KEEP, GW_YAML_SET, GW_YAML_REMOVE, GW_YAML_SET};

    *op = ops[bits & 3];
    *v = (bits & 3) == 3 ? GW_YAML_SPEC_MAX_TOKENS + 1 : val;
}

static const struct gw_conf_model_spec *
entry(const struct gw_conf *c, const char *prov, const char *model)
{
    const struct gw_conf_provider *p = gw_conf_provider_find(c, prov, strlen(prov));
    size_t i;

    for (i = 0; p && i < p->n_model_specs; i++)
        if (strcmp(p->model_specs[i].model, model) == 0)
            return &p->model_specs[i];
    return NULL;
}

static uint64_t
want(enum gw_yaml_op op, uint64_t set, uint64_t old)
{
    return op == GW_YAML_SET ? set : op == GW_YAML_REMOVE ? 0 : old;
}

/* Two configs agree on every provider other than <prov>: same model specs. */
static bool
others_same(const struct gw_conf *a, const struct gw_conf *b, const char *prov)
{
    size_t i, j;

    if (a->n_providers != b->n_providers)
        return false;
    for (i = 0; i < a->n_providers; i++) {
        const struct gw_conf_provider *x = &a->providers[i], *y = &b->providers[i];

        if (strcmp(x->name, prov) == 0)
            continue;
        if (x->n_model_specs != y->n_model_specs)
            return false;
        for (j = 0; j < x->n_model_specs; j++)
            if (strcmp(x->model_specs[j].model, y->model_specs[j].model) != 0 ||
                x->model_specs[j].context_window != y->model_specs[j].context_window ||
                x->model_specs[j].max_output_tokens != y->model_specs[j].max_output_tokens)
                return false;
    }
    return true;
}

static size_t
list_len(const struct gw_conf *c, int list)
{
    return list == 0 ? c->n_providers : list == 1 ? c->n_groups : c->n_clients;
}

static bool
list_has(const struct gw_conf *c, int list, const char *name)
{
    size_t n = strlen(name);

    return list == 0   ? gw_conf_provider_find(c, name, n) != NULL
           : list == 1 ? gw_conf_group_find(c, name, n) != NULL
                       : gw_conf_client_find(c, name, n) != NULL;
}

/* The entry's "name" when it is a simple JSON string value, else NULL. */
static char *
entry_name(const char *entry)
{
    const char *p = strstr(entry, "\"name\": \""), *q;

    if (!p)
        return NULL;
    p += 9;
    q = strchr(p, '"');
    if (!q || memchr(p, '\\', (size_t)(q - p)))
        return NULL;
    /* A raw control character is not JSON: the entry is read as YAML, whose double-quoted
     * scalars fold a line break into a space. The control API never hands one over (it
     * re-dumps the body with jansson, which escapes them, and names are [a-z0-9._-]). */
    for (const char *c = p; c < q; c++)
        if ((unsigned char)*c < 0x20)
            return NULL;
    return strndup(p, (size_t)(q - p));
}

static void
fuzz_entry(const char *line1, const char *entry, size_t elen, const char *yaml, size_t ylen)
{
    static const char *const lists[3] = {"providers", "groups", "clients"};
    struct gw_conf_problems p = {0};
    struct gw_conf *before = NULL, *after = NULL;
    struct gw_buf out = {0};
    int list = line1[0] >= '0' && line1[0] <= '2' ? line1[0] - '0' : 0;
    const char *name = line1[0] ? line1 + 1 : "";
    char why[256], *newname = NULL;
    bool created = false;
    enum gw_code rc;

    rc = gw_yaml_set_entry(yaml, ylen, lists[list], name, elen ? entry : NULL, elen, &out, &created,
                           why, sizeof(why));
    if (rc != GW_OK) {
        if (out.len != 0 || why[0] == '\0')
            __builtin_trap();
        goto out;
    }
    if (gw_conf_parse(yaml, ylen, "/fuzz", &env, &before, &p) != GW_OK)
        goto out;
    gw_conf_problems_fini(&p);
    if (gw_conf_parse(out.data ? out.data : "", out.len, "/fuzz", &env, &after, &p) != GW_OK)
        goto out;
    for (int l = 0; l < 3; l++) {
        size_t want = list_len(before, l);

        if (l == list && !elen)
            want--;
        else if (l == list && created)
            want++;
        if (list_len(after, l) != want)
            __builtin_trap();
    }
    if (!elen && list_has(after, list, name))
        __builtin_trap();
    newname = elen ? entry_name(entry) : NULL;
    if (newname && !list_has(after, list, newname))
        __builtin_trap();
out:
    free(newname);
    gw_conf_free(before);
    gw_conf_free(after);
    gw_conf_problems_fini(&p);
    gw_buf_fini(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *nl1, *nl2;
    char *prov = NULL, *model = NULL;
    struct gw_yaml_spec_edit e;
    struct gw_conf_problems p = {0};
    struct gw_conf *before = NULL, *after = NULL;
    struct gw_buf out = {0};
    const char *yaml;
    size_t ylen;
    char why[256];
    enum gw_code rc;

    nl1 = memchr(s, '\n', size);
    nl2 = nl1 ? memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - s)) : NULL;
    if (!nl2 || (size_t)(nl2 + 1 - s) >= size)
        return 0;
    prov = strndup(s, (size_t)(nl1 - s));
    model = strndup(nl1 + 1, (size_t)(nl2 - nl1 - 1));
    if (!prov || !model)
        goto out;
    if (prov[0] == '@') {
        fuzz_entry(prov + 1, model, strlen(model), nl2 + 2, size - (size_t)(nl2 + 2 - s));
        goto out;
    }
    op_of((unsigned)nl2[1], 128000, &e.context_window_op, &e.context_window);
    op_of((unsigned)nl2[1] >> 2, 4096, &e.max_output_tokens_op, &e.max_output_tokens);
    yaml = nl2 + 2;
    ylen = size - (size_t)(yaml - s);

    rc = gw_yaml_set_model_spec(yaml, ylen, prov, model, &e, &out, why, sizeof(why));
    if (rc != GW_OK) {
        if (out.len != 0 || why[0] == '\0')
            __builtin_trap();
        goto out;
    }
    if (gw_conf_parse(yaml, ylen, "/fuzz", &env, &before, &p) != GW_OK)
        goto out;
    gw_conf_problems_fini(&p);
    if (gw_conf_parse(out.data ? out.data : "", out.len, "/fuzz", &env, &after, &p) == GW_OK) {
        const struct gw_conf_model_spec *o = entry(before, prov, model);
        const struct gw_conf_model_spec *n = entry(after, prov, model);
        uint64_t cw = want(e.context_window_op, e.context_window, o ? o->context_window : 0);
        uint64_t mo =
            want(e.max_output_tokens_op, e.max_output_tokens, o ? o->max_output_tokens : 0);

        if (n ? n->context_window != cw || n->max_output_tokens != mo : (cw || mo))
            __builtin_trap();
        if (!others_same(before, after, prov))
            __builtin_trap();
    }
out:
    gw_conf_free(before);
    gw_conf_free(after);
    gw_conf_problems_fini(&p);
    gw_buf_fini(&out);
    free(prov);
    free(model);
    return 0;
}
