/* SPDX-License-Identifier: MIT
 * dialects/gemini_config.c - the configuration of a Gemini client's request, for the
 * parse of gemini_request.c (whose header says what maps where): tools
 * (functionDeclarations and hosted tools), toolConfig (the calling mode, the allowed
 * functions) and generationConfig (sampling, output size and format, thinking, the
 * needs and extras of everything else), and the rewrite of Gemini's OpenAPI-subset
 * schemas for JSON Schema consumers.
 * Owns:    nothing; what parse builds lives in the caller's arena.
 * Threads: any; one request on one thread.
 * See:     dialects/gemini_request.c, dialects/gemini-priv.h, docs/fields-gemini.md,
 *          tests/unit/dialects/test_gemini_request.c
 */
#include "dialects/gemini-priv.h"

#include <string.h>

/* ---- schemas: Gemini's OpenAPI subset for JSON Schema consumers ---- */

/* True when <t> (a string token of <w>) is one of the OpenAPI type names in upper case. */
static bool
is_upper_type(const struct dl_json *w, const struct dl_json_str *t)
{
    static const char *const names[] = {"STRING", "NUMBER", "INTEGER", "BOOLEAN",
                                        "ARRAY",  "OBJECT", "NULL"};
    size_t i;

    if (t->escaped)
        return false;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (dl_json_key_is(w, t, names[i], strlen(names[i])))
            return true;
    return false;
}

/* Keywords whose values are data, not schemas: a "type" inside them is not a type. */
static bool
is_data_keyword(const struct dl_json *w, const struct dl_json_str *k)
{
    return dl_json_key_is(w, k, "enum", 4) || dl_json_key_is(w, k, "example", 7) ||
           dl_json_key_is(w, k, "examples", 8) || dl_json_key_is(w, k, "default", 7) ||
           dl_json_key_is(w, k, "const", 5);
}

/* <raw> (a validated JSON value) with the values of its "type" members that are upper
 * case OpenAPI type names lower-cased: <raw> itself when none is, else a copy in the
 * arena. Walked without recursion (the depth is bounded by the scanner's limit). */
static enum gw_code
lower_types(struct gw_arena *a, struct gw_str raw, struct gw_str *out)
{
    bool firsts[DL_JSON_MAX_DEPTH + 1], objs[DL_JSON_MAX_DEPTH + 1];
    struct dl_json w;
    struct dl_json_str key, t;
    char *copy = NULL;
    unsigned depth = 0;
    bool type_value = false;
    int r;

    *out = raw;
    dl_json_init(&w, raw.ptr, raw.len);
    for (;;) {
        int c = dl_json_peek(&w);

        /* the value at the cursor (validated by the parse: a failure cannot happen, and
         * would leave the rest as it is) */
        if (c == '{' || c == '[') {
            if (depth == DL_JSON_MAX_DEPTH ||
                !(c == '{' ? dl_json_obj_enter(&w) : dl_json_arr_enter(&w)))
                return GW_OK;
            depth++;
            objs[depth] = c == '{';
            firsts[depth] = true;
        } else if (c == '"') {
            if (!dl_json_string(&w, &t))
                return GW_OK;
            if (type_value && is_upper_type(&w, &t)) {
                size_t k;

                if (!copy) {
                    copy = gw_arena_alloc(a, raw.len + 1);
                    if (!copy)
                        return GW_E_NOMEM;
                    memcpy(copy, raw.ptr, raw.len);
                    copy[raw.len] = '\0';
                    *out = (struct gw_str){copy, raw.len};
                }
                for (k = t.start; k < t.end; k++)
                    copy[k] = (char)(copy[k] - 'A' + 'a');
            }
        } else if (!dl_json_skip(&w, NULL)) {
            return GW_OK;
        }
        type_value = false;
        /* on to the next value, closing the containers that end */
        for (;;) {
            if (depth == 0)
                return GW_OK;
            if (objs[depth]) {
                r = dl_json_obj_next(&w, &firsts[depth], &key);
                if (r == 1 && is_data_keyword(&w, &key)) {
                    if (!dl_json_skip(&w, NULL))
                        return GW_OK;
                    continue;
                }
                type_value = r == 1 && dl_json_key_is(&w, &key, "type", 4);
            } else {
                r = dl_json_arr_next(&w, &firsts[depth]);
            }
            if (r < 0)
                return GW_OK;
            if (r == 1)
                break;
            depth--;
        }
    }
}

/* ---- tools ---- */

static enum gw_code
rp_declaration(struct dl_gm_rp *p, struct dl_json *j, size_t t, size_t d)
{
    struct dl_gm_field f[] = {DL_GM_FIELD("name"), DL_GM_FIELD("description"),
                              DL_GM_FIELD("parameters"), DL_GM_FIELD("parametersJsonSchema")};
    struct dl_request *r = p->r;
    char path[96], tools[48];
    struct dl_tool *tool;
    enum gw_code rc;

    gw_path_item(tools, sizeof(tools), "tools", t, ".functionDeclarations");
    gw_path_item(path, sizeof(path), tools, d, "");
    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return dl_gm_bad_json(p, j);
        return dl_gm_bad(p, "%s: must be an object", path);
    }
    if (!dl_gm_fields(j, f, 4))
        return dl_gm_bad_json(p, j);
    tool = gw_arena_push(p->a, (void **)&r->tools, &r->n_tools, &p->cap_tools, sizeof(*tool));
    if (!tool)
        return GW_E_NOMEM;
    if (f[0].kind != GK_STR || f[0].str.dlen == 0)
        return dl_gm_bad(p, "%s.name: required string", path);
    rc = dl_gm_want_str(p, j, &f[0], path, true, &tool->name);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, j, &f[1], path, false, &tool->description);
    if (rc != GW_OK)
        return rc;
    if (dl_gm_given(&f[2]) && dl_gm_given(&f[3]))
        return dl_gm_bad(p, "%s: parameters and parametersJsonSchema cannot both be given", path);
    if (dl_gm_given(&f[2])) {
        if (f[2].kind != GK_OBJ)
            return dl_gm_bad(p, "%s.parameters: must be a schema object", path);
        tool->source_parameters = dl_gm_raw(j, &f[2]);
        return lower_types(p->a, tool->source_parameters, &tool->parameters);
    }
    if (dl_gm_given(&f[3])) {
        if (f[3].kind != GK_OBJ)
            return dl_gm_bad(p, "%s.parametersJsonSchema: must be a JSON schema object", path);
        tool->parameters = dl_gm_raw(j, &f[3]);
    }
    return GW_OK;
}

/* A member of a tool other than functionDeclarations: a hosted tool {"<key>":<value>}. */
static enum gw_code
rp_hosted(struct dl_gm_rp *p, const struct dl_json *j, const struct dl_json_str *key,
          const struct dl_gm_field *v)
{
    struct dl_request *r = p->r;
    struct dl_tool *tool;
    struct gw_str rawkey = {j->s + key->start - 1, key->end - key->start + 2};
    struct gw_str raw = dl_gm_raw(j, v);
    char *d;

    tool = gw_arena_push(p->a, (void **)&r->tools, &r->n_tools, &p->cap_tools, sizeof(*tool));
    if (!tool || !dl_gm_take_str(p, j, key, &tool->name))
        return GW_E_NOMEM;
    d = gw_arena_alloc(p->a, rawkey.len + raw.len + 4);
    if (!d)
        return GW_E_NOMEM;
    d[0] = '{';
    memcpy(d + 1, rawkey.ptr, rawkey.len);
    d[1 + rawkey.len] = ':';
    memcpy(d + 2 + rawkey.len, raw.ptr, raw.len);
    d[2 + rawkey.len + raw.len] = '}';
    d[3 + rawkey.len + raw.len] = '\0';
    tool->hosted = (struct gw_str){d, rawkey.len + raw.len + 3};
    r->needs |= DL_NEED_F_HOSTED_TOOLS;
    return GW_OK;
}

static enum gw_code
rp_tool(struct dl_gm_rp *p, struct dl_json *j, size_t t)
{
    struct dl_json_str key;
    bool first = true;
    int r;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return dl_gm_bad_json(p, j);
        return dl_gm_bad(p, "tools[%zu]: must be an object", t);
    }
    if (!dl_json_obj_enter(j))
        return dl_gm_bad_json(p, j);
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        struct dl_gm_field v = DL_GM_FIELD("");
        enum gw_code rc = GW_OK;

        if (!dl_gm_key_is(j, &key, "functionDeclarations")) {
            if (!dl_gm_value(j, &v))
                return dl_gm_bad_json(p, j);
            if (v.kind != GK_NULL)
                rc = rp_hosted(p, j, &key, &v);
        } else if (dl_json_peek(j) == '[') {
            bool dfirst = true;
            size_t d = 0;
            int dr;

            if (!dl_json_arr_enter(j))
                return dl_gm_bad_json(p, j);
            while (rc == GW_OK && (dr = dl_json_arr_next(j, &dfirst)) == 1)
                rc = rp_declaration(p, j, t, d++);
            if (rc == GW_OK && dr != 0)
                return dl_gm_bad_json(p, j);
        } else {
            if (!dl_gm_value(j, &v))
                return dl_gm_bad_json(p, j);
            if (v.kind != GK_NULL)
                return dl_gm_bad(p, "tools[%zu].functionDeclarations: must be an array", t);
        }
        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : dl_gm_bad_json(p, j);
}

enum gw_code
dl_gm_parse_tools(struct dl_gm_rp *p, const struct dl_gm_field *f)
{
    struct dl_json j = dl_gm_at(&p->j, f->at);
    bool first = true;
    size_t t = 0;
    int r;

    if (f->kind == GK_NULL)
        return GW_OK;
    if (f->kind != GK_ARR)
        return dl_gm_bad(p, "tools: must be an array");
    if (!dl_json_arr_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        enum gw_code rc = rp_tool(p, &j, t++);

        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : dl_gm_bad_json(p, &j);
}

/* ---- toolConfig ---- */

/* Keeps only the function tools named in <names> (hosted tools stay). */
static void
keep_allowed(struct dl_gm_rp *p, const struct gw_str *names, size_t n)
{
    struct dl_request *r = p->r;
    size_t t, k, kept = 0;

    for (t = 0; t < r->n_tools; t++) {
        bool allowed = r->tools[t].hosted.len > 0;

        for (k = 0; k < n && !allowed; k++)
            allowed = gw_str_eq(names[k], r->tools[t].name);
        if (allowed)
            r->tools[kept++] = r->tools[t];
    }
    r->n_tools = kept;
}

static enum gw_code
rp_calling_config(struct dl_gm_rp *p, const struct dl_json *doc, const struct dl_gm_field *f)
{
    struct dl_json j = dl_gm_at(doc, f->at);
    struct dl_request *r = p->r;
    struct dl_json_str key;
    struct dl_gm_field mode = DL_GM_FIELD("mode"), names = DL_GM_FIELD("allowedFunctionNames");
    struct gw_str *allowed = NULL;
    bool first = true, validated = false;
    size_t n = 0, cap = 0;
    int c;
    enum gw_code rc;

    if (f->kind == GK_NULL)
        return GW_OK;
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "toolConfig.functionCallingConfig: must be an object");
    if (!dl_json_obj_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((c = dl_json_obj_next(&j, &first, &key)) == 1) {
        struct dl_gm_field v = DL_GM_FIELD("");
        struct dl_gm_field *dst = dl_gm_key_is(&j, &key, "mode")                   ? &mode
                                  : dl_gm_key_is(&j, &key, "allowedFunctionNames") ? &names
                                                                                   : &v;

        if (!dl_gm_value(&j, dst))
            return dl_gm_bad_json(p, &j);
        if (dst == &v && v.kind != GK_NULL) {
            rc =
                dl_gm_extra_at(p, "toolConfig.functionCallingConfig.", &j, &key, dl_gm_raw(&j, &v));
            if (rc != GW_OK)
                return rc;
        }
    }
    if (c != 0)
        return dl_gm_bad_json(p, &j);
    if (dl_gm_given(&names)) {
        bool nfirst = true;

        if (names.kind != GK_ARR)
            return dl_gm_bad(p, "toolConfig.functionCallingConfig.allowedFunctionNames: must be an "
                                "array of strings");
        struct dl_json nj = dl_gm_at(&j, names.at);

        (void)dl_json_arr_enter(&nj);
        while ((c = dl_json_arr_next(&nj, &nfirst)) == 1) {
            struct gw_str *name;
            struct dl_json_str t;

            if (dl_json_peek(&nj) != '"' || !dl_json_string(&nj, &t))
                return dl_gm_bad(p,
                                 "toolConfig.functionCallingConfig.allowedFunctionNames[%zu]: "
                                 "must be a string",
                                 n);
            name = gw_arena_push(p->a, (void **)&allowed, &n, &cap, sizeof(*name));
            if (!name || !dl_gm_take_str(p, &nj, &t, name))
                return GW_E_NOMEM;
        }
    }
    if (!dl_gm_given(&mode) || dl_gm_is(&j, &mode, "MODE_UNSPECIFIED"))
        return GW_OK;
    if (dl_gm_is(&j, &mode, "NONE")) {
        r->tool_choice = DL_TOOL_CHOICE_NONE;
        return GW_OK;
    }
    if (dl_gm_is(&j, &mode, "AUTO")) {
        r->tool_choice = DL_TOOL_CHOICE_AUTO;
    } else if (dl_gm_is(&j, &mode, "VALIDATED")) {
        r->tool_choice = DL_TOOL_CHOICE_AUTO;
        validated = true;
    } else if (dl_gm_is(&j, &mode, "ANY")) {
        r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
        if (n == 1) {
            r->tool_choice = DL_TOOL_CHOICE_NAMED;
            r->tool_choice_name = allowed[0];
            return GW_OK;
        }
    } else {
        return dl_gm_bad(p, "toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or "
                            "VALIDATED");
    }
    if (validated) {
        rc = dl_gm_extra(p, GW_STR_LIT("toolConfig.functionCallingConfig.mode"),
                         dl_gm_raw(&j, &mode));
        if (rc != GW_OK)
            return rc;
    }
    if (n > 0)
        keep_allowed(p, allowed, n);
    return GW_OK;
}

enum gw_code
dl_gm_parse_tool_config(struct dl_gm_rp *p)
{
    struct dl_gm_field fcc = DL_GM_FIELD("functionCallingConfig");
    struct dl_json j = dl_gm_at(&p->j, p->tool_config_at);
    struct dl_json_str key;
    bool first = true;
    int r;

    if (!p->has_tool_config || dl_json_peek(&j) == 'n')
        return GW_OK;
    if (dl_json_peek(&j) != '{')
        return dl_gm_bad(p, "toolConfig: must be an object");
    if (!dl_json_obj_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_obj_next(&j, &first, &key)) == 1) {
        struct dl_gm_field v = DL_GM_FIELD("");

        if (dl_gm_key_is(&j, &key, "functionCallingConfig")) {
            if (!dl_gm_value(&j, &fcc)) /* the last copy counts */
                return dl_gm_bad_json(p, &j);
            continue;
        }
        if (!dl_gm_value(&j, &v))
            return dl_gm_bad_json(p, &j);
        if (v.kind != GK_NULL) {
            enum gw_code rc = dl_gm_extra_at(p, "toolConfig.", &j, &key, dl_gm_raw(&j, &v));

            if (rc != GW_OK)
                return rc;
        }
    }
    if (r != 0)
        return dl_gm_bad_json(p, &j);
    return dl_gm_given(&fcc) ? rp_calling_config(p, &j, &fcc) : GW_OK;
}

/* ---- generationConfig ---- */

enum gc {
    GC_TEMPERATURE,
    GC_TOP_P,
    GC_TOP_K,
    GC_CANDIDATES,
    GC_MAX_OUTPUT,
    GC_STOP,
    GC_SEED,
    GC_PRESENCE,
    GC_FREQUENCY,
    GC_MIME,
    GC_SCHEMA,
    GC_JSON_SCHEMA,
    GC_LOGPROBS_ON,
    GC_LOGPROBS,
    GC_MODALITIES,
    GC_THINKING,
    GC__COUNT,
};

static const char *const gc_names[GC__COUNT] = {
    [GC_TEMPERATURE] = "temperature",
    [GC_TOP_P] = "topP",
    [GC_TOP_K] = "topK",
    [GC_CANDIDATES] = "candidateCount",
    [GC_MAX_OUTPUT] = "maxOutputTokens",
    [GC_STOP] = "stopSequences",
    [GC_SEED] = "seed",
    [GC_PRESENCE] = "presencePenalty",
    [GC_FREQUENCY] = "frequencyPenalty",
    [GC_MIME] = "responseMimeType",
    [GC_SCHEMA] = "responseSchema",
    [GC_JSON_SCHEMA] = "responseJsonSchema",
    [GC_LOGPROBS_ON] = "responseLogprobs",
    [GC_LOGPROBS] = "logprobs",
    [GC_MODALITIES] = "responseModalities",
    [GC_THINKING] = "thinkingConfig",
};

/* A number member: <*has> and <*out> when given (null: not given). */
static enum gw_code
rp_real(struct dl_gm_rp *p, struct dl_json *j, const struct dl_gm_field *f, bool *has, double *out)
{
    if (!dl_gm_given(f))
        return GW_OK;
    if (f->kind != GK_NUM)
        return dl_gm_bad(p, "generationConfig.%s: must be a number", f->name);
    if (!dl_json_num_real(j, &f->num, out))
        return GW_E_NOMEM;
    *has = true;
    return GW_OK;
}

/* An integer member (an integral real too) at least <min>; <*has> when given. */
static enum gw_code
rp_integer(struct dl_gm_rp *p, struct dl_json *j, const struct dl_gm_field *f, const char *path,
           int64_t min, bool *has, int64_t *out)
{
    if (!dl_gm_given(f))
        return GW_OK;
    if (f->kind != GK_NUM || !dl_gm_int(j, &f->num, out) || *out < min)
        return j->err == DL_JSON_E_NOMEM
                   ? GW_E_NOMEM
                   : dl_gm_bad(p, "%s.%s: must be an integer of at least %lld", path, f->name,
                               (long long)min);
    *has = true;
    return GW_OK;
}

static enum gw_code
rp_stop(struct dl_gm_rp *p, struct dl_json *doc, const struct dl_gm_field *f)
{
    struct dl_request *r = p->r;
    struct dl_json j = dl_gm_at(doc, f->at);
    bool first = true;
    size_t k = 0;
    int c;

    if (!dl_gm_given(f))
        return GW_OK;
    if (f->kind != GK_ARR)
        return dl_gm_bad(p, "generationConfig.stopSequences: must be an array of strings");
    (void)dl_json_arr_enter(&j);
    while ((c = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_json_str t;
        struct gw_str *s;

        if (dl_json_peek(&j) != '"' || !dl_json_string(&j, &t))
            return dl_gm_bad(p, "generationConfig.stopSequences[%zu]: must be a string", k);
        s = gw_arena_push(p->a, (void **)&r->stop, &r->n_stop, &p->cap_stop, sizeof(*s));
        if (!s || !dl_gm_take_str(p, &j, &t, s))
            return GW_E_NOMEM;
        k++;
    }
    return c == 0 ? GW_OK : dl_gm_bad_json(p, &j);
}

/* responseModalities: its needs, and the extra. */
static enum gw_code
rp_modalities(struct dl_gm_rp *p, struct dl_json *doc, const struct dl_gm_field *f)
{
    struct dl_json j = dl_gm_at(doc, f->at);
    bool first = true;
    size_t k = 0;
    int c;

    if (!dl_gm_given(f))
        return GW_OK;
    if (f->kind != GK_ARR)
        return dl_gm_bad(p, "generationConfig.responseModalities: must be an array of strings");
    (void)dl_json_arr_enter(&j);
    while ((c = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_json_str t;

        if (dl_json_peek(&j) != '"' || !dl_json_string(&j, &t))
            return dl_gm_bad(p, "generationConfig.responseModalities[%zu]: must be a string", k);
        if (dl_json_key_is(&j, &t, "IMAGE", 5))
            p->r->needs |= DL_NEED_F_IMAGE_OUT;
        if (dl_json_key_is(&j, &t, "AUDIO", 5))
            p->r->needs |= DL_NEED_F_AUDIO_OUT;
        k++;
    }
    if (c != 0)
        return dl_gm_bad_json(p, &j);
    return dl_gm_extra(p, GW_STR_LIT("generationConfig.responseModalities"), dl_gm_raw(doc, f));
}

static enum gw_code
rp_thinking(struct dl_gm_rp *p, struct dl_json *doc, const struct dl_gm_field *f)
{
    struct dl_gm_field budget = DL_GM_FIELD("thinkingBudget"), level = DL_GM_FIELD("thinkingLevel"),
                       thoughts = DL_GM_FIELD("includeThoughts");
    struct dl_json j = dl_gm_at(doc, f->at);
    struct dl_request *r = p->r;
    struct dl_json_str key;
    int64_t b = 0;
    bool first = true, has = false;
    int c;
    enum gw_code rc;

    if (!dl_gm_given(f))
        return GW_OK;
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "generationConfig.thinkingConfig: must be an object");
    (void)dl_json_obj_enter(&j);
    while ((c = dl_json_obj_next(&j, &first, &key)) == 1) {
        struct dl_gm_field v = DL_GM_FIELD("");
        struct dl_gm_field *dst = dl_gm_key_is(&j, &key, budget.name)     ? &budget
                                  : dl_gm_key_is(&j, &key, level.name)    ? &level
                                  : dl_gm_key_is(&j, &key, thoughts.name) ? &thoughts
                                                                          : &v;

        if (!dl_gm_value(&j, dst)) /* a later copy of a key counts, as the API reads it */
            return dl_gm_bad_json(p, &j);
        if (dst == &v && v.kind != GK_NULL) {
            rc = dl_gm_extra_at(p, "generationConfig.thinkingConfig.", &j, &key, dl_gm_raw(&j, &v));
            if (rc != GW_OK)
                return rc;
        }
    }
    if (c != 0)
        return dl_gm_bad_json(p, &j);
    rc = rp_integer(p, &j, &budget, "generationConfig.thinkingConfig", -1, &has, &b);
    if (rc != GW_OK)
        return rc;
    if (has && b > 0) {
        r->thinking = true;
        r->thinking_budget = (uint64_t)b;
    } else if (has) {
        /* 0 (off) and -1 (dynamic) have no canonical budget: a Gemini upstream gets them
         * as written */
        r->thinking |= b < 0;
        rc = dl_gm_extra(p, GW_STR_LIT("generationConfig.thinkingConfig.thinkingBudget"),
                         dl_gm_raw(&j, &budget));
        if (rc != GW_OK)
            return rc;
    }
    if (dl_gm_given(&level) && level.kind != GK_STR)
        return dl_gm_bad(p, "generationConfig.thinkingConfig.thinkingLevel: must be a string");
    if (dl_gm_given(&level) && !dl_json_key_is(&j, &level.str, "THINKING_LEVEL_UNSPECIFIED", 26)) {
        struct gw_str lv;
        char *low;
        size_t i;

        if (!dl_gm_take_str(p, &j, &level.str, &lv))
            return GW_E_NOMEM;
        low = gw_arena_alloc(p->a, lv.len + 1);
        if (!low)
            return GW_E_NOMEM;
        for (i = 0; i < lv.len; i++)
            low[i] =
                lv.ptr[i] >= 'A' && lv.ptr[i] <= 'Z' ? (char)(lv.ptr[i] - 'A' + 'a') : lv.ptr[i];
        low[lv.len] = '\0';
        r->reasoning_effort = (struct gw_str){low, lv.len};
        r->thinking = true;
    }
    if (!dl_gm_given(&thoughts))
        return GW_OK;
    if (thoughts.kind != GK_TRUE && thoughts.kind != GK_FALSE)
        return dl_gm_bad(p, "generationConfig.thinkingConfig.includeThoughts: must be a boolean");
    return dl_gm_extra(p, GW_STR_LIT("generationConfig.thinkingConfig.includeThoughts"),
                       dl_gm_raw(&j, &thoughts));
}

/* responseMimeType and the schemas. */
static enum gw_code
rp_format(struct dl_gm_rp *p, struct dl_json *j, struct dl_gm_field *g)
{
    struct dl_request *r = p->r;
    bool json = dl_gm_is(j, &g[GC_MIME], "application/json");
    bool text = !dl_gm_given(&g[GC_MIME]) || dl_gm_is(j, &g[GC_MIME], "text/plain");
    enum gw_code rc;

    if (dl_gm_given(&g[GC_MIME]) && g[GC_MIME].kind != GK_STR)
        return dl_gm_bad(p, "generationConfig.responseMimeType: must be a string");
    if (dl_gm_given(&g[GC_SCHEMA]) && dl_gm_given(&g[GC_JSON_SCHEMA]))
        return dl_gm_bad(p,
                         "generationConfig: responseSchema and responseJsonSchema cannot both be "
                         "given");
    if (dl_gm_given(&g[GC_SCHEMA]) && g[GC_SCHEMA].kind != GK_OBJ)
        return dl_gm_bad(p, "generationConfig.responseSchema: must be a schema object");
    if (!json && !text) {
        /* another output type (text/x.enum...): the schema goes with it, as written */
        size_t k;

        for (k = GC_MIME; k <= GC_JSON_SCHEMA; k++) {
            if (!dl_gm_given(&g[k]))
                continue;
            rc = dl_gm_extra(p,
                             dl_gm_cat(p->a, GW_STR_LIT("generationConfig."), gw_str_c(g[k].name)),
                             dl_gm_raw(j, &g[k]));
            if (rc != GW_OK)
                return rc;
        }
        return GW_OK;
    }
    if (dl_gm_given(&g[GC_SCHEMA])) {
        r->format = DL_FORMAT_JSON_SCHEMA;
        r->format_source_schema = dl_gm_raw(j, &g[GC_SCHEMA]);
        return lower_types(p->a, r->format_source_schema, &r->format_schema);
    }
    if (dl_gm_given(&g[GC_JSON_SCHEMA])) {
        r->format = DL_FORMAT_JSON_SCHEMA;
        r->format_schema = dl_gm_raw(j, &g[GC_JSON_SCHEMA]);
    } else if (json) {
        r->format = DL_FORMAT_JSON_OBJECT;
    }
    return GW_OK;
}

enum gw_code
dl_gm_parse_generation(struct dl_gm_rp *p, const struct dl_gm_field *f)
{
    struct dl_json j = dl_gm_at(&p->j, f->at);
    struct dl_gm_field g[GC__COUNT];
    struct dl_request *r = p->r;
    struct dl_json_str key;
    int64_t v = 0;
    bool first = true, has = false;
    size_t k;
    int c;
    enum gw_code rc = GW_OK;

    if (f->kind == GK_NULL)
        return GW_OK;
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "generationConfig: must be an object");
    for (k = 0; k < GC__COUNT; k++)
        g[k] = (struct dl_gm_field)DL_GM_FIELD(gc_names[k]);
    (void)dl_json_obj_enter(&j);
    while ((c = dl_json_obj_next(&j, &first, &key)) == 1) {
        struct dl_gm_field x = DL_GM_FIELD("");
        struct dl_gm_field *dst = &x;

        for (k = 0; k < GC__COUNT; k++)
            if (dl_gm_key_is(&j, &key, gc_names[k]))
                dst = &g[k];
        if (!dl_gm_value(&j, dst))
            return dl_gm_bad_json(p, &j);
        dst->count++;
        if (dst == &x && x.kind != GK_NULL) {
            rc = dl_gm_extra_at(p, "generationConfig.", &j, &key, dl_gm_raw(&j, &x));
            if (rc != GW_OK)
                return rc;
        }
    }
    if (c != 0)
        return dl_gm_bad_json(p, &j);
    rc = rp_real(p, &j, &g[GC_TEMPERATURE], &r->has_temperature, &r->temperature);
    if (rc == GW_OK)
        rc = rp_real(p, &j, &g[GC_TOP_P], &r->has_top_p, &r->top_p);
    if (rc == GW_OK)
        rc = rp_real(p, &j, &g[GC_PRESENCE], &r->has_presence, &r->presence_penalty);
    if (rc == GW_OK)
        rc = rp_real(p, &j, &g[GC_FREQUENCY], &r->has_frequency, &r->frequency_penalty);
    if (rc == GW_OK)
        rc = rp_integer(p, &j, &g[GC_TOP_K], "generationConfig", 0, &r->has_top_k, &r->top_k);
    if (rc == GW_OK)
        rc = rp_integer(p, &j, &g[GC_SEED], "generationConfig", INT64_MIN, &r->has_seed, &r->seed);
    if (rc == GW_OK)
        rc = rp_integer(p, &j, &g[GC_MAX_OUTPUT], "generationConfig", 1, &has, &v);
    if (rc != GW_OK)
        return rc;
    if (has)
        r->max_output_tokens = (uint64_t)v;
    has = false;
    rc = rp_integer(p, &j, &g[GC_CANDIDATES], "generationConfig", 1, &has, &v);
    if (rc == GW_OK && has && v > 1) {
        r->needs |= DL_NEED_F_N_CHOICES;
        rc = dl_gm_extra(p, GW_STR_LIT("generationConfig.candidateCount"),
                         dl_gm_raw(&j, &g[GC_CANDIDATES]));
    }
    if (rc == GW_OK && dl_gm_given(&g[GC_LOGPROBS_ON])) {
        if (g[GC_LOGPROBS_ON].kind != GK_TRUE && g[GC_LOGPROBS_ON].kind != GK_FALSE)
            return dl_gm_bad(p, "generationConfig.responseLogprobs: must be a boolean");
        if (g[GC_LOGPROBS_ON].kind == GK_TRUE)
            r->needs |= DL_NEED_F_LOGPROBS;
        rc = dl_gm_extra(p, GW_STR_LIT("generationConfig.responseLogprobs"),
                         dl_gm_raw(&j, &g[GC_LOGPROBS_ON]));
    }
    has = false;
    if (rc == GW_OK)
        rc = rp_integer(p, &j, &g[GC_LOGPROBS], "generationConfig", 0, &has, &v);
    if (rc == GW_OK && has) {
        if (v > 0)
            r->needs |= DL_NEED_F_LOGPROBS;
        rc =
            dl_gm_extra(p, GW_STR_LIT("generationConfig.logprobs"), dl_gm_raw(&j, &g[GC_LOGPROBS]));
    }
    if (rc == GW_OK)
        rc = rp_stop(p, &j, &g[GC_STOP]);
    if (rc == GW_OK)
        rc = rp_modalities(p, &j, &g[GC_MODALITIES]);
    if (rc == GW_OK)
        rc = rp_thinking(p, &j, &g[GC_THINKING]);
    if (rc == GW_OK)
        rc = rp_format(p, &j, g);
    return rc;
}
