/* SPDX-License-Identifier: MIT
 * core/yaml_edit.c - rewrites one providers[].model_specs entry of the config text and
 * copies every other byte as it was (see core/yaml_edit.h).
 * How: libyaml loads the document tree of the text; each node carries the position of
 * its first character and of the character after it. Those are character indexes
 * (libyaml counts code points, a CRLF as two), so a table maps them to byte offsets.
 * A block collection "ends" where the next token starts (after trailing comments), so
 * the end of a node's own text is taken from its last leaf instead (content_end).
 * Every change is one splice: the bytes [a, b) are replaced by a rendered text.
 * A second pass over the parser's events refuses anchors and aliases inside the
 * provider's entry (an edit there would change other places too) and streams of more
 * than one document.
 * Exception to "core calls libcyaml in conf*.c only": this file uses libyaml (the
 * parser libcyaml is built on) directly, as core/conf.c does for its document tree.
 * Owns:    the document tree and the offset table of one call.
 * Threads: any; never blocks.
 * See:     core/yaml_edit.h, tests/unit/core/test_yaml_edit.c
 */
#include "core/yaml_edit.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "core/alloc.h"

#define YE_MAX_DEPTH 64 /* content_end recursion; alias cycles stop here */

struct ye {
    const char *y; /* the text */
    size_t len;
    size_t *off; /* character index -> byte offset; nchars + 1 entries */
    size_t nchars;
    yaml_document_t doc;
    bool have_doc;
    const char *eol; /* the file's line end: "\n" or "\r\n" */
    char *why;
    size_t whylen;
};

static enum gw_code fail(struct ye *x, enum gw_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum gw_code
fail(struct ye *x, enum gw_code code, const char *fmt, ...)
{
    va_list ap;

    if (x->whylen) {
        va_start(ap, fmt);
        vsnprintf(x->why, x->whylen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- positions ---- */

/* Builds the character -> byte table. libyaml skips a UTF-8 byte order mark without
 * counting it, so character 0 is the byte after it. */
static enum gw_code
offsets_build(struct ye *x)
{
    size_t i = 0, n = 0;

    if (x->len >= 3 && memcmp(x->y, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    x->off = gw_malloc((x->len - i + 1) * sizeof(*x->off));
    if (!x->off)
        return GW_E_NOMEM;
    for (; i < x->len; i++)
        if (((unsigned char)x->y[i] & 0xC0) != 0x80)
            x->off[n++] = i;
    x->off[n] = x->len;
    x->nchars = n;
    return GW_OK;
}

static size_t
bo(const struct ye *x, yaml_mark_t m)
{
    return m.index <= x->nchars ? x->off[m.index] : x->len;
}

static yaml_node_t *
node(struct ye *x, yaml_node_item_t id)
{
    return yaml_document_get_node(&x->doc, id);
}

static bool
is_flow(const yaml_node_t *n)
{
    return (n->type == YAML_MAPPING_NODE && n->data.mapping.style == YAML_FLOW_MAPPING_STYLE) ||
           (n->type == YAML_SEQUENCE_NODE && n->data.sequence.style == YAML_FLOW_SEQUENCE_STYLE);
}

static size_t
n_pairs(const yaml_node_t *m)
{
    return (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
}

/* The byte after the node's own text: for a block collection, the end of its last
 * leaf (its end mark lies after the comments and blank lines that follow it). */
static size_t
content_end(struct ye *x, yaml_node_t *n, int depth)
{
    yaml_node_t *last = NULL;

    if (depth < YE_MAX_DEPTH && !is_flow(n)) {
        if (n->type == YAML_MAPPING_NODE && n_pairs(n) > 0)
            last = node(x, n->data.mapping.pairs.top[-1].value);
        else if (n->type == YAML_SEQUENCE_NODE &&
                 n->data.sequence.items.top > n->data.sequence.items.start)
            last = node(x, n->data.sequence.items.top[-1]);
    }
    if (last)
        return content_end(x, last, depth + 1);
    return bo(x, n->end_mark);
}

static bool
scalar_is(const yaml_node_t *n, const char *s)
{
    size_t l = strlen(s);

    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == l &&
           memcmp(n->data.scalar.value, s, l) == 0;
}

/* The index of the pair of mapping <m> whose key is <key>, -1 when none; <*count>
 * how many pairs have that key. */
static long
pair_find(struct ye *x, yaml_node_t *m, const char *key, unsigned *count)
{
    long found = -1;
    size_t i;

    *count = 0;
    if (!m || m->type != YAML_MAPPING_NODE)
        return -1;
    for (i = 0; i < n_pairs(m); i++) {
        if (scalar_is(node(x, m->data.mapping.pairs.start[i].key), key)) {
            if (found < 0)
                found = (long)i;
            (*count)++;
        }
    }
    return found;
}

static yaml_node_t *
pair_key(struct ye *x, yaml_node_t *m, size_t i)
{
    return node(x, m->data.mapping.pairs.start[i].key);
}

static yaml_node_t *
pair_value(struct ye *x, yaml_node_t *m, size_t i)
{
    return node(x, m->data.mapping.pairs.start[i].value);
}

/* Where a new line goes after a node that ends at byte <e>: the start of the next line,
 * or <e> itself when <e> already starts a line (a block scalar ends after its line
 * break). Only blanks and a comment may follow <e> on its line; (size_t)-1 otherwise. */
static size_t
line_after(const struct ye *x, size_t e)
{
    size_t p = e;

    while (p > 0 && (x->y[p - 1] == ' ' || x->y[p - 1] == '\t'))
        p--;
    if (p == 0 || x->y[p - 1] == '\n')
        return p;
    for (p = e; p < x->len && (x->y[p] == ' ' || x->y[p] == '\t' || x->y[p] == '\r'); p++)
        ;
    if (p < x->len && x->y[p] == '#')
        while (p < x->len && x->y[p] != '\n')
            p++;
    if (p < x->len && x->y[p] != '\n')
        return (size_t)-1;
    return p < x->len ? p + 1 : p;
}

/* ---- rendering ---- */

/* A scalar as it may stand in a flow mapping: its own bytes when they are one line and
 * (when plain) free of flow indicators, else its value double-quoted. */
static enum gw_code
render_scalar(struct ye *x, yaml_node_t *n, struct gw_buf *t)
{
    size_t a = bo(x, n->start_mark), b = bo(x, n->end_mark);
    bool raw = a <= b && b <= x->len;
    size_t i;

    if (n->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
        n->data.scalar.style == YAML_FOLDED_SCALAR_STYLE)
        raw = false;
    for (i = a; raw && i < b; i++) {
        char c = x->y[i];

        if (c == '\n' || c == '\r')
            raw = false;
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strchr(",[]{}#", c))
            raw = false;
    }
    if (raw && b > a)
        return gw_buf_append(t, x->y + a, b - a);
    return gw_buf_append_json_str(
        t, (struct gw_str){(const char *)n->data.scalar.value, n->data.scalar.length});
}

/* A kept pair "key: value" of an entry. */
static enum gw_code
render_pair(struct ye *x, yaml_node_t *k, yaml_node_t *v, struct gw_buf *t)
{
    size_t a, b;

    if (!k || k->type != YAML_SCALAR_NODE || !v)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "the entry has a key that is not a name");
    if (render_scalar(x, k, t) != GW_OK || gw_buf_append(t, ": ", 2) != GW_OK)
        return GW_E_NOMEM;
    if (v->type == YAML_SCALAR_NODE)
        return render_scalar(x, v, t) != GW_OK ? GW_E_NOMEM : GW_OK;
    a = bo(x, v->start_mark);
    b = content_end(x, v, 0);
    if (!is_flow(v) || b < a || memchr(x->y + a, '\n', b - a))
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "the entry holds a nested value written over several lines");
    return gw_buf_append(t, x->y + a, b - a);
}

static enum gw_code
render_field(struct gw_buf *t, bool *first, const char *name, uint64_t v)
{
    if (gw_buf_printf(t, "%s%s: ", *first ? "" : ", ", name) != GW_OK ||
        gw_buf_append_u64(t, v) != GW_OK)
        return GW_E_NOMEM;
    *first = false;
    return GW_OK;
}

/* The new entry as one flow mapping into <t>, from the old value <old> (NULL when the
 * entry is new) and <e>; <*nfields> how many fields it holds. */
static enum gw_code
render_entry(struct ye *x, yaml_node_t *old, const struct gw_yaml_spec_edit *e, struct gw_buf *t,
             size_t *nfields)
{
    bool first = true, cw_done = false, mo_done = false;
    enum gw_code rc;
    size_t i;

    *nfields = 0;
    if (gw_buf_append(t, "{", 1) != GW_OK)
        return GW_E_NOMEM;
    for (i = 0; old && old->type == YAML_MAPPING_NODE && i < n_pairs(old); i++) {
        yaml_node_t *k = pair_key(x, old, i), *v = pair_value(x, old, i);
        enum gw_yaml_op op = GW_YAML_KEEP;
        uint64_t val = 0;
        bool *done = NULL;

        if (scalar_is(k, "context_window")) {
            op = e->context_window_op;
            val = e->context_window;
            done = &cw_done;
        } else if (scalar_is(k, "max_output_tokens")) {
            op = e->max_output_tokens_op;
            val = e->max_output_tokens;
            done = &mo_done;
        }
        if (op == GW_YAML_REMOVE)
            continue;
        if (op == GW_YAML_SET) {
            if (*done) /* written twice: the config refuses that; keep one */
                continue;
            *done = true;
            rc = render_field(
                t, &first, scalar_is(k, "context_window") ? "context_window" : "max_output_tokens",
                val);
        } else {
            if (!first && gw_buf_append(t, ", ", 2) != GW_OK)
                return GW_E_NOMEM;
            first = false;
            rc = render_pair(x, k, v, t);
        }
        if (rc != GW_OK)
            return rc;
        (*nfields)++;
    }
    if (e->context_window_op == GW_YAML_SET && !cw_done) {
        if (render_field(t, &first, "context_window", e->context_window) != GW_OK)
            return GW_E_NOMEM;
        (*nfields)++;
    }
    if (e->max_output_tokens_op == GW_YAML_SET && !mo_done) {
        if (render_field(t, &first, "max_output_tokens", e->max_output_tokens) != GW_OK)
            return GW_E_NOMEM;
        (*nfields)++;
    }
    return gw_buf_append(t, "}", 1);
}

/* ---- splices ---- */

struct splice {
    size_t a, b;         /* bytes [a, b) of the text are replaced ... */
    struct gw_buf *text; /* ... by these */
};

/* Removes pair <i> of mapping <m>: its lines in block style, the pair and one comma in
 * flow style. */
static enum gw_code
splice_remove(struct ye *x, yaml_node_t *m, size_t i, struct splice *s)
{
    size_t n = n_pairs(m), ka = bo(x, pair_key(x, m, i)->start_mark), p;

    if (is_flow(m)) {
        if (i + 1 < n) {
            s->a = ka;
            s->b = bo(x, pair_key(x, m, i + 1)->start_mark);
        } else if (i > 0) {
            s->a = content_end(x, pair_value(x, m, i - 1), 0);
            s->b = content_end(x, pair_value(x, m, i), 0);
        } else {
            s->a = ka;
            s->b = content_end(x, pair_value(x, m, i), 0);
        }
        return s->a <= s->b ? GW_OK
                            : fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    }
    for (p = ka; p > 0 && x->y[p - 1] == ' '; p--)
        ;
    if (p > 0 && x->y[p - 1] != '\n')
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "the key to remove does not start its line (write it on a line of its own)");
    s->a = p;
    s->b = line_after(x, content_end(x, pair_value(x, m, i), 0));
    if (s->b == (size_t)-1 || s->b < s->a)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "unexpected text after the entry on its last line");
    return GW_OK;
}

/* Adds "<key>: <val>" to mapping <m>: a new line at the indentation of its keys in
 * block style, ", key: val" after the last pair in flow style. */
static enum gw_code
splice_add(struct ye *x, yaml_node_t *m, const struct gw_buf *key, const struct gw_buf *val,
           struct splice *s)
{
    size_t n = n_pairs(m), at, col;

    if (is_flow(m)) {
        if (n == 0) {
            at = bo(x, m->start_mark);
            if (at >= x->len || x->y[at] != '{')
                return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
            s->a = s->b = at + 1;
            return gw_buf_printf(s->text, "%s: %s", key->data, val->data);
        }
        s->a = s->b = content_end(x, pair_value(x, m, n - 1), 0);
        return gw_buf_printf(s->text, ", %s: %s", key->data, val->data);
    }
    if (n == 0)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    at = line_after(x, content_end(x, pair_value(x, m, n - 1), 0));
    if (at == (size_t)-1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "unexpected text after the last key of the mapping");
    s->a = s->b = at;
    col = m->start_mark.column; /* the column of its first key: spaces (and "- ") before */
    if (at == x->len && at > 0 && x->y[at - 1] != '\n' &&
        gw_buf_append_cstr(s->text, x->eol) != GW_OK)
        return GW_E_NOMEM;
    if (gw_buf_printf(s->text, "%*s%s: %s%s", (int)col, "", key->data, val->data, x->eol) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* Replaces the value of pair <i> of mapping <m> by <val>. A block mapping value is
 * replaced from just after the key's colon, so the entry becomes one line. */
static enum gw_code
splice_value(struct ye *x, yaml_node_t *m, size_t i, const struct gw_buf *val, struct splice *s)
{
    yaml_node_t *k = pair_key(x, m, i), *v = pair_value(x, m, i);
    size_t p;

    s->b = content_end(x, v, 0);
    s->a = bo(x, v->start_mark);
    if (v->type == YAML_MAPPING_NODE && !is_flow(v)) {
        for (p = bo(x, k->end_mark); p < x->len && (x->y[p] == ' ' || x->y[p] == '\t'); p++)
            ;
        if (p < x->len && x->y[p] == ':')
            s->a = p + 1;
    }
    if (s->a > s->b)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    if (s->a > 0 && x->y[s->a - 1] == ':' && gw_buf_append(s->text, " ", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append(s->text, val->data, val->len);
}

/* ---- checks ---- */

/* Refuses a stream of several documents, and anchors or aliases in the bytes [a, b)
 * (the provider's entry). */
static enum gw_code
check_events(struct ye *x, size_t a, size_t b)
{
    yaml_parser_t p;
    yaml_event_t ev;
    unsigned docs = 0;
    enum gw_code rc = GW_OK;
    bool done = false;

    if (!yaml_parser_initialize(&p))
        return GW_E_NOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)x->y, x->len);
    while (!done && rc == GW_OK) {
        const yaml_char_t *anchor = NULL;
        size_t at;

        if (!yaml_parser_parse(&p, &ev)) {
            rc = p.error == YAML_MEMORY_ERROR ? GW_E_NOMEM
                                              : fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                                                     "YAML error: %s", p.problem ? p.problem : "?");
            break;
        }
        at = bo(x, ev.start_mark);
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = true; break;
        case YAML_DOCUMENT_START_EVENT: docs++; break;
        case YAML_ALIAS_EVENT: anchor = ev.data.alias.anchor; break;
        case YAML_SCALAR_EVENT: anchor = ev.data.scalar.anchor; break;
        case YAML_SEQUENCE_START_EVENT: anchor = ev.data.sequence_start.anchor; break;
        case YAML_MAPPING_START_EVENT: anchor = ev.data.mapping_start.anchor; break;
        default: break;
        }
        if (anchor && at >= a && at < b)
            rc = fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                      "the entry uses an anchor or alias (&%.40s / *%.40s): edit it "
                      "by hand",
                      (const char *)anchor, (const char *)anchor);
        if (docs > 1)
            rc = fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                      "the file holds more than one YAML document");
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

static enum gw_code
load(struct ye *x)
{
    yaml_parser_t p;
    enum gw_code rc = GW_OK;

    if (x->len >= 2 && ((unsigned char)x->y[0] == 0xFE || (unsigned char)x->y[0] == 0xFF ||
                        x->y[0] == 0 || x->y[1] == 0))
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "the file is not UTF-8");
    if (!yaml_parser_initialize(&p))
        return GW_E_NOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)x->y, x->len);
    if (!yaml_parser_load(&p, &x->doc)) {
        rc = p.error == YAML_MEMORY_ERROR
                 ? GW_E_NOMEM
                 : fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "YAML error at line %u column %u: %s",
                        (unsigned)p.problem_mark.line + 1, (unsigned)p.problem_mark.column + 1,
                        p.problem ? p.problem : "?");
    } else {
        x->have_doc = true;
    }
    yaml_parser_delete(&p);
    return rc;
}

static bool
model_is_blank(const char *m)
{
    return m[strspn(m, " \t")] == '\0';
}

static enum gw_code
check_edit(struct ye *x, const char *model, const struct gw_yaml_spec_edit *e)
{
    const enum gw_yaml_op ops[2] = {e->context_window_op, e->max_output_tokens_op};
    const uint64_t vals[2] = {e->context_window, e->max_output_tokens};
    static const char *const names[2] = {"context_window", "max_output_tokens"};
    int i;

    if (model_is_blank(model))
        return fail(x, GW_E_CFG_MODEL_SPEC_BLANK_MODEL, "model: a model id must not be blank");
    if (strcmp(model, "*") == 0)
        return fail(x, GW_E_CFG_MODEL_SPEC_WILDCARD,
                    "model: a model spec names one model id, not \"*\"");
    for (i = 0; i < 2; i++) {
        if (ops[i] != GW_YAML_SET)
            continue;
        if (vals[i] == 0)
            return fail(x, GW_E_CFG_MODEL_SPEC_ZERO,
                        "%s: 0 (must be 1..100000000 tokens; null removes it)", names[i]);
        if (vals[i] > GW_YAML_SPEC_MAX_TOKENS)
            return fail(x, GW_E_CFG_RANGE, "%s: %llu (must be 1..100000000 tokens)", names[i],
                        (unsigned long long)vals[i]);
    }
    return GW_OK;
}

/* ---- the edit ---- */

static enum gw_code
edit(struct ye *x, const char *provider, const char *model, const struct gw_yaml_spec_edit *e,
     struct splice *s)
{
    yaml_node_t *root, *seq, *item = NULL, *msv = NULL;
    struct gw_buf ent = {0}, key = {0}, val = {0};
    long ms_i, ent_i = -1;
    size_t i, nfields, ia, ib;
    unsigned count, found = 0;
    enum gw_code rc;

    rc = load(x);
    if (rc != GW_OK)
        return rc;
    root = yaml_document_get_root_node(&x->doc);
    ms_i = pair_find(x, root, "providers", &count);
    if (ms_i < 0)
        return fail(x, GW_E_CONTROL_UNKNOWN_PROVIDER, "the file has no providers list");
    if (count > 1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "providers is written twice");
    seq = pair_value(x, root, (size_t)ms_i);
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return fail(x, GW_E_CONTROL_UNKNOWN_PROVIDER, "providers is not a list");
    /* a value reached through an alias lies before its key */
    if (bo(x, seq->start_mark) < bo(x, pair_key(x, root, (size_t)ms_i)->end_mark))
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "providers is an alias: edit it by hand");
    for (i = 0; i < (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start); i++) {
        yaml_node_t *it = node(x, seq->data.sequence.items.start[i]);
        long ni = pair_find(x, it, "name", &count);

        if (ni >= 0 && scalar_is(pair_value(x, it, (size_t)ni), provider)) {
            item = it;
            found++;
        }
    }
    if (!item)
        return fail(x, GW_E_CONTROL_UNKNOWN_PROVIDER, "no provider named \"%.64s\" in the file",
                    provider);
    if (found > 1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "provider \"%.64s\" is written twice in the file", provider);
    ia = bo(x, item->start_mark);
    ib = bo(x, item->end_mark);
    if (ia < bo(x, seq->start_mark) || ia > ib)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "the provider's entry is an alias: edit it by hand");
    rc = check_events(x, ia, ib);
    if (rc != GW_OK)
        return rc;

    ms_i = pair_find(x, item, "model_specs", &count);
    if (count > 1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "model_specs is written twice");
    if (ms_i >= 0) {
        msv = pair_value(x, item, (size_t)ms_i);
        if (!msv || msv->type != YAML_MAPPING_NODE)
            return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                        "the provider's model_specs is not a mapping");
        ent_i = pair_find(x, msv, model, &count);
        if (count > 1)
            return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "model \"%.64s\" is written twice",
                        model);
    }
    rc = render_entry(x, ent_i >= 0 ? pair_value(x, msv, (size_t)ent_i) : NULL, e, &ent, &nfields);
    if (rc != GW_OK)
        goto out;
    rc = gw_buf_append_json_str(&key, gw_str_c(model));
    if (rc != GW_OK)
        goto out;
    if (ent_i >= 0 && nfields > 0) {
        rc = splice_value(x, msv, (size_t)ent_i, &ent, s);
    } else if (ent_i >= 0 && n_pairs(msv) > 1) {
        rc = splice_remove(x, msv, (size_t)ent_i, s);
    } else if (ent_i >= 0) { /* the last entry: model_specs goes */
        rc = splice_remove(x, item, (size_t)ms_i, s);
    } else if (nfields == 0) { /* nothing to add, nothing to remove */
        s->a = s->b = 0;
    } else if (msv) {
        rc = splice_add(x, msv, &key, &ent, s);
    } else {
        if (gw_buf_printf(&val, "{%s: %s}", key.data, ent.data) != GW_OK) {
            rc = GW_E_NOMEM;
            goto out;
        }
        gw_buf_reset(&key);
        rc = gw_buf_append_cstr(&key, "model_specs");
        if (rc == GW_OK)
            rc = splice_add(x, item, &key, &val, s);
    }
out:
    gw_buf_fini(&ent);
    gw_buf_fini(&key);
    gw_buf_fini(&val);
    return rc;
}

/* Sets up <x> for one call over <yaml>/<len>. */
static void
ye_init(struct ye *x, const char *yaml, size_t len, char *why, size_t whylen)
{
    const char *nl;

    memset(x, 0, sizeof(*x));
    x->y = yaml ? yaml : "";
    x->len = yaml ? len : 0;
    x->why = why;
    x->whylen = whylen;
    if (whylen)
        why[0] = '\0';
    nl = memchr(x->y, '\n', x->len);
    x->eol = nl && nl > x->y && nl[-1] == '\r' ? "\r\n" : "\n";
}

/* Writes the text with splice <s> applied to <out> when <rc> is GW_OK, frees what <x>
 * holds, and returns the final code (an error leaves <out> empty). */
static enum gw_code
ye_finish(struct ye *x, enum gw_code rc, const struct splice *s, struct gw_buf *out)
{
    const struct gw_buf *text = s->text;

    if (rc == GW_OK && (gw_buf_reserve(out, x->len + text->len + 1) != GW_OK ||
                        (s->a && gw_buf_append(out, x->y, s->a) != GW_OK) ||
                        (text->len && gw_buf_append(out, text->data, text->len) != GW_OK) ||
                        (s->b < x->len && gw_buf_append(out, x->y + s->b, x->len - s->b) != GW_OK)))
        rc = GW_E_NOMEM;
    if (rc != GW_OK) {
        gw_buf_reset(out);
        if (rc == GW_E_NOMEM)
            fail(x, rc, "out of memory");
    }
    if (x->have_doc)
        yaml_document_delete(&x->doc);
    gw_free(x->off);
    return rc;
}

enum gw_code
gw_yaml_set_model_spec(const char *yaml, size_t len, const char *provider, const char *model,
                       const struct gw_yaml_spec_edit *e, struct gw_buf *out, char *why,
                       size_t whylen)
{
    struct ye x;
    struct gw_buf text = {0};
    struct splice s = {0, 0, &text};
    enum gw_code rc;

    ye_init(&x, yaml, len, why, whylen);
    gw_buf_reset(out);
    rc = check_edit(&x, model, e);
    if (rc == GW_OK)
        rc = offsets_build(&x);
    if (rc == GW_OK)
        rc = edit(&x, provider, model, e, &s);
    rc = ye_finish(&x, rc, &s, out);
    gw_buf_fini(&text);
    return rc;
}

/* ---- whole list entries (providers, groups, clients) ---- */

#define YE_MAX_ENTRY (1024 * 1024) /* a rendered entry; stops alias blow-ups */

/* A string that reads back as the same string when written plain: a name-like word
 * that YAML 1.1 does not take for a number, a boolean or null. */
static bool
plain_ok(const char *s, size_t n)
{
    static const char *const words[] = {"true", "false", "yes", "no",  "on",
                                        "off",  "y",     "n",   "null"};
    size_t i;

    if (n == 0 || n > 256 ||
        !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '/' || c == '-'))
            return false;
    }
    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strlen(words[i]) == n && strncasecmp(words[i], s, n) == 0)
            return false;
    return true;
}

/* One node of the entry document <d> in flow style: plain scalars (numbers, true,
 * false, null) as given, strings plain when plain_ok, else double-quoted; mappings
 * {k: v, ...} and sequences [a, ...]. */
static enum gw_code
render_flow(struct ye *x, yaml_document_t *d, yaml_node_t *n, struct gw_buf *t, int depth)
{
    size_t i;

    if (!n || depth > YE_MAX_DEPTH || t->len > YE_MAX_ENTRY)
        return fail(x, GW_E_BAD_REQUEST, "the entry is nested too deep or too large");
    if (n->type == YAML_SCALAR_NODE) {
        const char *v = (const char *)n->data.scalar.value;
        size_t l = n->data.scalar.length;

        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && l > 0 &&
            strcspn(v, ",[]{}#:\n\r\t\"'&*!|>%@`") >= l)
            return gw_buf_append(t, v, l);
        if (plain_ok(v, l))
            return gw_buf_append(t, v, l);
        return gw_buf_append_json_str(t, (struct gw_str){v, l});
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        if (gw_buf_append(t, "[", 1) != GW_OK)
            return GW_E_NOMEM;
        for (i = 0; n->data.sequence.items.start + i < n->data.sequence.items.top; i++) {
            enum gw_code rc;

            if (i && gw_buf_append(t, ", ", 2) != GW_OK)
                return GW_E_NOMEM;
            rc = render_flow(x, d, yaml_document_get_node(d, n->data.sequence.items.start[i]), t,
                             depth + 1);
            if (rc != GW_OK)
                return rc;
        }
        return gw_buf_append(t, "]", 1);
    }
    if (n->type == YAML_MAPPING_NODE) {
        if (gw_buf_append(t, "{", 1) != GW_OK)
            return GW_E_NOMEM;
        for (i = 0; i < n_pairs(n); i++) {
            yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
            enum gw_code rc;

            if (i && gw_buf_append(t, ", ", 2) != GW_OK)
                return GW_E_NOMEM;
            rc = render_flow(x, d, yaml_document_get_node(d, p->key), t, depth + 1);
            if (rc == GW_OK)
                rc = gw_buf_append(t, ": ", 2);
            if (rc == GW_OK)
                rc = render_flow(x, d, yaml_document_get_node(d, p->value), t, depth + 1);
            if (rc != GW_OK)
                return rc;
        }
        return gw_buf_append(t, "}", 1);
    }
    return fail(x, GW_E_BAD_REQUEST, "the entry holds an empty node");
}

/* The entry mapping <m> in block style: "k: v" pairs, the first where the text goes,
 * the others on lines of their own at column <indent>; values in flow style. No line
 * end after the last pair. */
static enum gw_code
render_block(struct ye *x, yaml_document_t *d, yaml_node_t *m, size_t indent, struct gw_buf *t)
{
    size_t i;

    for (i = 0; i < n_pairs(m); i++) {
        yaml_node_pair_t *p = &m->data.mapping.pairs.start[i];
        enum gw_code rc = GW_OK;

        if (i && gw_buf_printf(t, "%s%*s", x->eol, (int)indent, "") != GW_OK)
            return GW_E_NOMEM;
        rc = render_flow(x, d, yaml_document_get_node(d, p->key), t, 1);
        if (rc == GW_OK)
            rc = gw_buf_append(t, ": ", 2);
        if (rc == GW_OK)
            rc = render_flow(x, d, yaml_document_get_node(d, p->value), t, 1);
        if (rc != GW_OK)
            return rc;
    }
    return GW_OK;
}

/* Loads the new entry (JSON, or YAML) into <d>; it must be a non-empty mapping. */
static enum gw_code
entry_load(struct ye *x, const char *entry, size_t len, yaml_document_t *d, yaml_node_t **root)
{
    yaml_parser_t p;
    enum gw_code rc = GW_OK;

    if (!yaml_parser_initialize(&p))
        return GW_E_NOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)entry, len);
    if (!yaml_parser_load(&p, d)) {
        rc = p.error == YAML_MEMORY_ERROR ? GW_E_NOMEM
                                          : fail(x, GW_E_BAD_REQUEST, "the entry is not JSON: %s",
                                                 p.problem ? p.problem : "?");
        yaml_parser_delete(&p);
        return rc;
    }
    yaml_parser_delete(&p);
    *root = yaml_document_get_root_node(d);
    if (!*root || (*root)->type != YAML_MAPPING_NODE || n_pairs(*root) == 0) {
        yaml_document_delete(d);
        return fail(x, GW_E_BAD_REQUEST, "the entry must be a JSON object with its fields");
    }
    return GW_OK;
}

static size_t
n_items(const yaml_node_t *s)
{
    return (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
}

static yaml_node_t *
item_at(struct ye *x, yaml_node_t *s, size_t i)
{
    return node(x, s->data.sequence.items.start[i]);
}

/* The byte of the "-" that opens block sequence item <it> (before it on its line, or on
 * an earlier line when the item starts on the next one); (size_t)-1 when none. */
static size_t
dash_of(struct ye *x, yaml_node_t *it)
{
    size_t p = bo(x, it->start_mark);

    while (p > 0 && strchr(" \t\r\n", x->y[p - 1]))
        p--;
    return p > 0 && x->y[p - 1] == '-' ? p - 1 : (size_t)-1;
}

/* The column (in bytes) of byte <p> on its line, and whether only blanks precede it. */
static size_t
col_of(struct ye *x, size_t p, bool *line_start)
{
    size_t q = p;

    while (q > 0 && x->y[q - 1] != '\n')
        q--;
    *line_start = true;
    for (size_t i = q; i < p; i++)
        if (x->y[i] != ' ')
            *line_start = false;
    return p - q;
}

/* The new entry <d>/<root> as item text: flow when <flow>, else block at <indent>. */
static enum gw_code
render_item(struct ye *x, yaml_document_t *d, yaml_node_t *root, bool flow, size_t indent,
            struct gw_buf *t)
{
    return flow ? render_flow(x, d, root, t, 0) : render_block(x, d, root, indent, t);
}

/* Removes item <i> of sequence <seq> (the value of root pair <ki>). */
static enum gw_code
item_remove(struct ye *x, yaml_node_t *root, size_t ki, yaml_node_t *seq, size_t i,
            struct splice *s)
{
    size_t n = n_items(seq), dash, p;
    yaml_node_t *it = item_at(x, seq, i);
    bool ls;

    if (is_flow(seq)) {
        if (i + 1 < n) {
            s->a = bo(x, it->start_mark);
            s->b = bo(x, item_at(x, seq, i + 1)->start_mark);
        } else if (i > 0) {
            s->a = content_end(x, item_at(x, seq, i - 1), 0);
            s->b = content_end(x, it, 0);
        } else {
            s->a = bo(x, it->start_mark);
            s->b = content_end(x, it, 0);
        }
        return s->a <= s->b ? GW_OK
                            : fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    }
    if (n == 1) { /* the list stays, empty: "name: []" */
        yaml_node_t *k = pair_key(x, root, ki);

        for (p = bo(x, k->end_mark); p < x->len && (x->y[p] == ' ' || x->y[p] == '\t'); p++)
            ;
        if (p >= x->len || x->y[p] != ':')
            return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
        s->a = p + 1;
        s->b = content_end(x, it, 0);
        if (s->b < s->a)
            return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
        return gw_buf_append_cstr(s->text, " []");
    }
    dash = dash_of(x, it);
    if (dash == (size_t)-1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    col_of(x, dash, &ls);
    if (!ls)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "the entry does not start its line (write \"- \" on a line of its own)");
    s->a = dash;
    while (s->a > 0 && x->y[s->a - 1] == ' ')
        s->a--;
    s->b = line_after(x, content_end(x, it, 0));
    if (s->b == (size_t)-1 || s->b < s->a)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "unexpected text after the entry on its last line");
    return GW_OK;
}

/* Adds the new entry after the last item of <seq> (or into an empty flow list). */
static enum gw_code
item_add(struct ye *x, yaml_node_t *seq, yaml_document_t *d, yaml_node_t *root, struct splice *s)
{
    size_t n = n_items(seq), at, dash, col;
    yaml_node_t *last;
    enum gw_code rc;
    bool ls;

    if (is_flow(seq)) {
        if (n == 0) {
            at = bo(x, seq->start_mark);
            if (at >= x->len || x->y[at] != '[')
                return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
            s->a = s->b = at + 1;
            return render_flow(x, d, root, s->text, 0);
        }
        s->a = s->b = content_end(x, item_at(x, seq, n - 1), 0);
        if (gw_buf_append(s->text, ", ", 2) != GW_OK)
            return GW_E_NOMEM;
        return render_flow(x, d, root, s->text, 0);
    }
    if (n == 0)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    last = item_at(x, seq, n - 1);
    dash = dash_of(x, item_at(x, seq, 0));
    if (dash == (size_t)-1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    col = col_of(x, dash, &ls);
    at = line_after(x, content_end(x, last, 0));
    if (!ls || at == (size_t)-1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "unexpected text after the last entry of the list");
    s->a = s->b = at;
    if (at == x->len && at > 0 && x->y[at - 1] != '\n' &&
        gw_buf_append_cstr(s->text, x->eol) != GW_OK)
        return GW_E_NOMEM;
    if (gw_buf_printf(s->text, "%*s- ", (int)col, "") != GW_OK)
        return GW_E_NOMEM;
    rc = render_item(x, d, root, is_flow(last), col + 2, s->text);
    return rc != GW_OK ? rc : gw_buf_append_cstr(s->text, x->eol);
}

/* Adds "<list>:" with the new entry as its one item after the last key of <root>. */
static enum gw_code
list_add(struct ye *x, yaml_node_t *root, const char *list, yaml_document_t *d, yaml_node_t *eroot,
         struct splice *s)
{
    size_t at, col = root->start_mark.column;
    enum gw_code rc;

    if (is_flow(root) || n_pairs(root) == 0)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "the file is not a block mapping: add \"%s: []\" by hand first", list);
    at = line_after(x, content_end(x, pair_value(x, root, n_pairs(root) - 1), 0));
    if (at == (size_t)-1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected text at the end of the file");
    s->a = s->b = at;
    if (at == x->len && at > 0 && x->y[at - 1] != '\n' &&
        gw_buf_append_cstr(s->text, x->eol) != GW_OK)
        return GW_E_NOMEM;
    if (gw_buf_printf(s->text, "%*s%s:%s%*s  - ", (int)col, "", list, x->eol, (int)col, "") !=
        GW_OK)
        return GW_E_NOMEM;
    rc = render_block(x, d, eroot, col + 4, s->text);
    return rc != GW_OK ? rc : gw_buf_append_cstr(s->text, x->eol);
}

static enum gw_code
not_found(struct ye *x, const char *list, const char *name)
{
    enum gw_code code = strcmp(list, "providers") == 0 ? GW_E_CONTROL_UNKNOWN_PROVIDER
                        : strcmp(list, "clients") == 0 ? GW_E_CONTROL_UNKNOWN_CLIENT
                                                       : GW_E_CONTROL_UNKNOWN_GROUP;

    return fail(x, code, "no entry named \"%.64s\" in %s", name, list);
}

static enum gw_code
entry_edit(struct ye *x, const char *list, const char *name, yaml_document_t *d, yaml_node_t *eroot,
           struct splice *s, bool *created)
{
    yaml_node_t *root, *seq, *item = NULL;
    long li;
    size_t i, at = 0, ia, ib;
    unsigned count, found = 0;
    enum gw_code rc;

    rc = load(x);
    if (rc != GW_OK)
        return rc;
    root = yaml_document_get_root_node(&x->doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "the file is not a YAML mapping");
    li = pair_find(x, root, list, &count);
    if (count > 1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "%s is written twice", list);
    if (li < 0) {
        if (!eroot)
            return not_found(x, list, name);
        rc = check_events(x, 0, 0);
        if (rc == GW_OK)
            rc = list_add(x, root, list, d, eroot, s);
        *created = rc == GW_OK;
        return rc;
    }
    seq = pair_value(x, root, (size_t)li);
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "%s is not a list (write \"%s: []\" to start one)", list, list);
    if (bo(x, seq->start_mark) < bo(x, pair_key(x, root, (size_t)li)->end_mark))
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "%s is an alias: edit it by hand", list);
    for (i = 0; i < n_items(seq); i++) {
        yaml_node_t *it = item_at(x, seq, i);
        long ni = pair_find(x, it, "name", &count);

        if (ni >= 0 && scalar_is(pair_value(x, it, (size_t)ni), name)) {
            item = it;
            at = i;
            found++;
        }
    }
    if (found > 1)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE,
                    "\"%.64s\" is written twice in %s: edit the file by hand", name, list);
    if (!item) {
        if (!eroot)
            return not_found(x, list, name);
        rc = check_events(x, 0, 0);
        if (rc == GW_OK)
            rc = item_add(x, seq, d, eroot, s);
        *created = rc == GW_OK;
        return rc;
    }
    ia = bo(x, item->start_mark);
    ib = bo(x, item->end_mark);
    if (ia < bo(x, seq->start_mark) || ia > ib)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "the entry is an alias: edit it by hand");
    rc = check_events(x, ia, ib);
    if (rc != GW_OK)
        return rc;
    if (!eroot)
        return item_remove(x, root, (size_t)li, seq, at, s);
    s->a = ia;
    s->b = content_end(x, item, 0);
    if (s->b < s->a || item->type != YAML_MAPPING_NODE)
        return fail(x, GW_E_CONTROL_CONFIG_NOT_EDITABLE, "unexpected layout");
    return render_item(x, d, eroot, is_flow(item), item->start_mark.column, s->text);
}

enum gw_code
gw_yaml_set_entry(const char *yaml, size_t len, const char *list, const char *name,
                  const char *entry, size_t entry_len, struct gw_buf *out, bool *created, char *why,
                  size_t whylen)
{
    struct ye x;
    struct gw_buf text = {0};
    struct splice s = {0, 0, &text};
    yaml_document_t d;
    yaml_node_t *eroot = NULL;
    bool have_entry = false, made = false;
    enum gw_code rc = GW_OK;

    ye_init(&x, yaml, len, why, whylen);
    gw_buf_reset(out);
    if (!name || !*name)
        rc = fail(&x, GW_E_BAD_REQUEST, "the entry's name is empty");
    if (rc == GW_OK && entry) {
        rc = entry_load(&x, entry, entry_len, &d, &eroot);
        have_entry = rc == GW_OK;
    }
    if (rc == GW_OK)
        rc = offsets_build(&x);
    if (rc == GW_OK)
        rc = entry_edit(&x, list, name, have_entry ? &d : NULL, eroot, &s, &made);
    rc = ye_finish(&x, rc, &s, out);
    if (have_entry)
        yaml_document_delete(&d);
    gw_buf_fini(&text);
    if (created)
        *created = rc == GW_OK && made;
    return rc;
}
